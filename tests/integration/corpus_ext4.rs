//! `caseload corpus --fs ext4` through the command line: a Linux server
//! image (and its E01) whose every allocated file the pipeline hashes to
//! the manifest's MD5, and whose E01 reads as the raw image. The writer's
//! own checks against e2fsck, TSK, debugfs and caseload-fs are in
//! `corpus-gen/tests/ext4.rs`.

#[test]
fn an_ext4_linux_server_corpus_is_read_back_as_its_manifest_says() {
    crate::corpus_exfat::read_back(
        "an_ext4_linux_server_corpus_is_read_back_as_its_manifest_says",
        "linux-server",
        ("ext4", "ext4"),
        "64MiB",
    );
}
