//! The case's full-text index as stored: its place in the case channel,
//! its schema, and the tantivy `Directory` that puts its files on a
//! channel. Shared by the `index` stage, which writes it, and
//! [`crate::search`], which reads it, so neither reaches into the other.

mod directory;
mod moving;

pub use directory::ChannelDirectory;
pub use moving::MovingDirectory;
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};

/// The index's directory inside the case channel.
pub const INDEX_DIR: &str = "index";

/// The fields of the index.
#[derive(Debug, Clone, Copy)]
pub struct Fields {
    /// `file`, `carved`, `slack` or `unallocated`.
    pub kind: Field,
    /// Row id (files, carved items), or the media offset (unallocated).
    pub id: Field,
    /// Chunk number within the item.
    pub part: Field,
    /// Path or description to show.
    pub label: Field,
    /// The extracted text (indexed with positions, and stored for `--regex`
    /// and hit counting).
    pub text: Field,
}

/// The index schema.
pub fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let kind = b.add_text_field("kind", STRING | STORED);
    let id = b.add_i64_field("id", INDEXED | STORED | FAST);
    let part = b.add_u64_field("part", STORED);
    let label = b.add_text_field("label", STORED);
    let text = b.add_text_field(
        "text",
        TextOptions::default()
            .set_indexing_options(
                TextFieldIndexing::default()
                    .set_tokenizer("default")
                    .set_index_option(IndexRecordOption::WithFreqsAndPositions),
            )
            .set_stored(),
    );
    (
        b.build(),
        Fields {
            kind,
            id,
            part,
            label,
            text,
        },
    )
}
