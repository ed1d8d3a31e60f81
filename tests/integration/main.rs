//! caseload's integration tests, in one binary: each module drives the
//! `caseload` executable (or the libraries) and checks what it did against
//! ground truth (corpus manifests, the real images' answer keys) and
//! external oracles. One binary links once instead of once per file.

mod advise;
mod bench_storage;
mod carve_corpus;
mod carve_nested;
mod carve_real;
mod carve_signatures;
mod casedb_postgres;
mod channel_faults;
mod cli_checks;
mod common;
mod compare_bad_input;
mod compare_instances;
mod compare_layouts;
mod compare_report;
mod compare_support;
mod corpus_apfs;
mod corpus_bad_input;
mod corpus_content;
mod corpus_determinism;
mod corpus_e01;
mod corpus_exfat;
mod corpus_ext4;
mod corpus_filesystem;
mod corpus_ntfs;
mod corpus_scale;
mod corpus_support;
mod distributed;
mod engine_channels;
mod engine_corrupt_e01;
mod engine_ewf_layouts;
mod engine_image_hash;
mod engine_instances;
mod engine_preprocess_corpus;
mod engine_preprocess_real;
mod evidence_containers;
mod evidence_reads;
mod ewf_convert;
mod ewf_real_images;
mod floors;
mod forensics_samples;
mod fuzz_replay;
mod index_corpus;
mod index_formats;
mod index_real;
mod index_support;
mod kernels;
mod kff_bad_input;
mod kff_corpus;
mod kff_real_images;
mod lab;
mod model;
mod predict;
mod preflight;
mod profiles;
mod resume;
mod run_json;
#[path = "../../ewf-writer/tests/support/shared.rs"]
#[allow(dead_code)]
mod shared;
mod study;
mod trace;
mod trace_replay;
mod wine;
mod workload_new_filesystems;
mod workstation;
