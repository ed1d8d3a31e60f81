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
    /// The extracted text: indexed with positions, and stored beside them
    /// where the profile keeps a copy ([`schema`]).
    pub text: Field,
}

/// The index schema. `store_text`: keep a copy of each document's text
/// beside its postings, as Solr under Autopsy does (`text` and
/// `content_str` are stored fields of Autopsy's schema) and as `--regex`
/// needs; dtSearch under FTK keeps words and positions only and reads the
/// item again to show a hit.
pub fn schema(store_text: bool) -> (Schema, Fields) {
    let mut b = Schema::builder();
    let kind = b.add_text_field("kind", STRING | STORED);
    let id = b.add_i64_field("id", INDEXED | STORED | FAST);
    let part = b.add_u64_field("part", STORED);
    let label = b.add_text_field("label", STORED);
    let options = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer("default")
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let text = b.add_text_field(
        "text",
        if store_text {
            options.set_stored()
        } else {
            options
        },
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

/// The fields of an index as written (by name), and whether it keeps its
/// text: a case's index is read as its run wrote it, whatever the profile
/// of the reader.
pub fn fields_of(schema: &Schema) -> tantivy::Result<(Fields, bool)> {
    let text = schema.get_field("text")?;
    let fields = Fields {
        kind: schema.get_field("kind")?,
        id: schema.get_field("id")?,
        part: schema.get_field("part")?,
        label: schema.get_field("label")?,
        text,
    };
    Ok((fields, schema.get_field_entry(text).is_stored()))
}
