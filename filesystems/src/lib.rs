//! Read-only parsers for volume systems (MBR, GPT) and file systems (FAT, NTFS).
