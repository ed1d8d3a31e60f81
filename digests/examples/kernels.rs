//! Print this crate's and the lanes' measured choices as JSON lines.

fn main() {
    for k in caseload_digests::kernels() {
        println!("{}", serde_json::to_string(&k).unwrap_or_default());
    }
}
