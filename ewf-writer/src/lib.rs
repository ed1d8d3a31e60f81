//! A streaming writer for Expert Witness Format (EWF v1, EnCase 6 layout).
