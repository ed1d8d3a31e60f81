-- caseload case database, schema version 1. Documented in docs/schema.md.
-- Times are ISO 8601 UTC text for run bookkeeping and Unix seconds (integer)
-- for file-system timestamps; hashes are lower-case hex; sizes are bytes.

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE runs (
    id               INTEGER PRIMARY KEY,
    started_at       TEXT NOT NULL,
    finished_at      TEXT,
    caseload_version TEXT NOT NULL,
    workload         TEXT,
    stages           TEXT NOT NULL,
    threads          INTEGER NOT NULL,
    cache_mode       TEXT NOT NULL,
    journal_mode     TEXT NOT NULL,
    synchronous      TEXT NOT NULL,
    batch_size       INTEGER NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed'))
);

CREATE TABLE evidence (
    id              INTEGER PRIMARY KEY,
    path            TEXT NOT NULL,
    format          TEXT NOT NULL,
    media_size      INTEGER NOT NULL,
    container_bytes INTEGER NOT NULL,
    chunk_size      INTEGER,
    stored_md5      TEXT,
    stored_sha1     TEXT,
    md5             TEXT,
    sha1            TEXT,
    sha256          TEXT,
    hash_verified   TEXT CHECK (hash_verified IN ('match', 'mismatch', 'not-stored', 'incomplete'))
);

CREATE TABLE evidence_files (
    evidence_id INTEGER NOT NULL REFERENCES evidence(id),
    seq         INTEGER NOT NULL,
    path        TEXT NOT NULL,
    bytes       INTEGER NOT NULL,
    PRIMARY KEY (evidence_id, seq)
);

CREATE TABLE evidence_metadata (
    evidence_id INTEGER NOT NULL REFERENCES evidence(id),
    key         TEXT NOT NULL,
    value       TEXT NOT NULL
);

CREATE TABLE volumes (
    id          INTEGER PRIMARY KEY,
    evidence_id INTEGER NOT NULL REFERENCES evidence(id),
    slot        INTEGER NOT NULL,
    scheme      TEXT NOT NULL,
    offset      INTEGER NOT NULL,
    length      INTEGER NOT NULL,
    type_code   TEXT,
    description TEXT,
    fs_type     TEXT,
    fs_label    TEXT,
    parsed      INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE files (
    id                 INTEGER PRIMARY KEY,
    volume_id          INTEGER NOT NULL REFERENCES volumes(id),
    meta_addr          TEXT,
    path               TEXT NOT NULL,
    name               TEXT NOT NULL,
    raw_name           BLOB,
    short_name         TEXT,
    kind               TEXT NOT NULL,
    size               INTEGER NOT NULL,
    allocated          INTEGER NOT NULL,
    recovery           TEXT NOT NULL,
    recoverable        INTEGER NOT NULL DEFAULT 1,
    attributes         INTEGER,
    mtime              INTEGER,
    atime              INTEGER,
    ctime              INTEGER,
    crtime             INTEGER,
    fn_mtime           INTEGER,
    fn_atime           INTEGER,
    fn_ctime           INTEGER,
    fn_crtime          INTEGER,
    extents            TEXT,
    encoding           TEXT,
    first_offset       INTEGER,
    resident_data      BLOB,
    slack              TEXT,
    md5                TEXT,
    sha1               TEXT,
    sha256             TEXT,
    signature          TEXT,
    extension_mismatch INTEGER,
    entropy            REAL,
    duplicate_group    INTEGER,
    kff                TEXT
);
CREATE INDEX files_by_volume ON files(volume_id);
CREATE INDEX files_by_offset ON files(coalesce(first_offset, -1), id);

CREATE TABLE carved_items (
    id          INTEGER PRIMARY KEY,
    evidence_id INTEGER NOT NULL REFERENCES evidence(id),
    volume_id   INTEGER REFERENCES volumes(id),
    method      TEXT NOT NULL,
    offset      INTEGER NOT NULL,
    length      INTEGER NOT NULL,
    type        TEXT NOT NULL,
    validation  TEXT NOT NULL,
    case_path   TEXT,
    md5         TEXT,
    sha1        TEXT,
    sha256      TEXT,
    entropy     REAL,
    kff         TEXT,
    detail      TEXT,
    source         TEXT,
    signature      TEXT,
    record         TEXT,
    name           TEXT,
    kind           TEXT,
    size           INTEGER,
    content_length INTEGER,
    deleted        INTEGER,
    meta_addr      TEXT,
    first_cluster  INTEGER,
    extents        TEXT,
    mtime          INTEGER,
    atime          INTEGER,
    ctime          INTEGER,
    crtime         INTEGER
);

CREATE TABLE hits (
    id        INTEGER PRIMARY KEY,
    item_kind TEXT NOT NULL CHECK (item_kind IN ('file', 'carved', 'evidence')),
    item_id   INTEGER NOT NULL,
    kind      TEXT NOT NULL,
    name      TEXT NOT NULL,
    category  TEXT,
    detail    TEXT,
    count     INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX hits_by_item ON hits(item_kind, item_id);

CREATE TABLE processing_errors (
    id           INTEGER PRIMARY KEY,
    run_id       INTEGER REFERENCES runs(id),
    stage        TEXT NOT NULL,
    severity     TEXT NOT NULL CHECK (severity IN ('error', 'warning', 'finding')),
    item_kind    TEXT,
    item_id      INTEGER,
    path         TEXT,
    first_sector INTEGER,
    last_sector  INTEGER,
    message      TEXT NOT NULL
);

CREATE TABLE stage_runs (
    id             INTEGER PRIMARY KEY,
    run_id         INTEGER NOT NULL REFERENCES runs(id),
    seq            INTEGER NOT NULL,
    stage          TEXT NOT NULL,
    status         TEXT NOT NULL,
    started_at     TEXT NOT NULL,
    wall_ns        INTEGER NOT NULL,
    cpu_user_ns    INTEGER NOT NULL,
    cpu_system_ns  INTEGER NOT NULL,
    peak_rss_bytes INTEGER,
    items          INTEGER NOT NULL,
    bytes          INTEGER NOT NULL,
    summary        TEXT
);

CREATE TABLE channel_figures (
    stage_run_id     INTEGER NOT NULL REFERENCES stage_runs(id),
    channel          TEXT NOT NULL,
    bytes_read       INTEGER NOT NULL,
    read_ops         INTEGER NOT NULL,
    bytes_written    INTEGER NOT NULL,
    write_ops        INTEGER NOT NULL,
    fsyncs           INTEGER NOT NULL,
    read_blocked_ns  INTEGER NOT NULL,
    write_blocked_ns INTEGER NOT NULL,
    sync_blocked_ns  INTEGER NOT NULL,
    PRIMARY KEY (stage_run_id, channel)
);
