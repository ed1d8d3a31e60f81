-- caseload case database, schema version 3. Documented in docs/schema.md.
-- Times are ISO 8601 UTC text for run bookkeeping and Unix seconds (integer)
-- for file-system timestamps; hashes are lower-case hex; sizes are bytes.
--
-- One text for both engines: the words ID, INT, REAL and BLOB in braces are
-- spelled per engine by casedb::schema (SQLite: INTEGER PRIMARY KEY,
-- INTEGER, REAL, BLOB; PostgreSQL: a BIGINT identity key, BIGINT, DOUBLE
-- PRECISION, BYTEA). "offset" is quoted because PostgreSQL reserves it.

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE runs (
    id               {ID},
    started_at       TEXT NOT NULL,
    finished_at      TEXT,
    caseload_version TEXT NOT NULL,
    workload         TEXT,
    stages           TEXT NOT NULL,
    threads          {INT} NOT NULL,
    cache_mode       TEXT NOT NULL,
    db_engine        TEXT NOT NULL,
    journal_mode     TEXT NOT NULL,
    synchronous      TEXT NOT NULL,
    batch_size       {INT} NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed'))
);

CREATE TABLE evidence (
    id              {ID},
    path            TEXT NOT NULL,
    format          TEXT NOT NULL,
    media_size      {INT} NOT NULL,
    container_bytes {INT} NOT NULL,
    chunk_size      {INT},
    stored_md5      TEXT,
    stored_sha1     TEXT,
    md5             TEXT,
    sha1            TEXT,
    sha256          TEXT,
    hash_verified   TEXT CHECK (hash_verified IN ('match', 'mismatch', 'not-stored', 'incomplete'))
);

CREATE TABLE evidence_files (
    evidence_id {INT} NOT NULL REFERENCES evidence(id),
    seq         {INT} NOT NULL,
    path        TEXT NOT NULL,
    bytes       {INT} NOT NULL,
    PRIMARY KEY (evidence_id, seq)
);

CREATE TABLE evidence_metadata (
    evidence_id {INT} NOT NULL REFERENCES evidence(id),
    key         TEXT NOT NULL,
    value       TEXT NOT NULL
);

CREATE TABLE volumes (
    id          {ID},
    evidence_id {INT} NOT NULL REFERENCES evidence(id),
    slot        {INT} NOT NULL,
    scheme      TEXT NOT NULL,
    "offset"    {INT} NOT NULL,
    length      {INT} NOT NULL,
    type_code   TEXT,
    description TEXT,
    fs_type     TEXT,
    fs_label    TEXT,
    parsed      {INT} NOT NULL DEFAULT 0
);

CREATE TABLE files (
    id                 {ID},
    volume_id          {INT} NOT NULL REFERENCES volumes(id),
    meta_addr          TEXT,
    path               TEXT NOT NULL,
    name               TEXT NOT NULL,
    raw_name           {BLOB},
    short_name         TEXT,
    kind               TEXT NOT NULL,
    size               {INT} NOT NULL,
    allocated          {INT} NOT NULL,
    recovery           TEXT NOT NULL,
    recoverable        {INT} NOT NULL DEFAULT 1,
    attributes         {INT},
    mode               {INT},
    uid                {INT},
    gid                {INT},
    mtime              {INT},
    atime              {INT},
    ctime              {INT},
    crtime             {INT},
    fn_mtime           {INT},
    fn_atime           {INT},
    fn_ctime           {INT},
    fn_crtime          {INT},
    extents            TEXT,
    encoding           TEXT,
    first_offset       {INT},
    resident_data      {BLOB},
    slack              TEXT,
    md5                TEXT,
    sha1               TEXT,
    sha256             TEXT,
    signature          TEXT,
    extension_mismatch {INT},
    entropy            {REAL},
    duplicate_group    {INT},
    kff                TEXT
);
CREATE INDEX files_by_volume ON files(volume_id);
CREATE INDEX files_by_offset ON files((coalesce(first_offset, -1)), id);

CREATE TABLE carved_items (
    id          {ID},
    evidence_id {INT} NOT NULL REFERENCES evidence(id),
    volume_id   {INT} REFERENCES volumes(id),
    method      TEXT NOT NULL,
    "offset"    {INT} NOT NULL,
    length      {INT} NOT NULL,
    type        TEXT NOT NULL,
    validation  TEXT NOT NULL,
    case_path   TEXT,
    md5         TEXT,
    sha1        TEXT,
    sha256      TEXT,
    entropy     {REAL},
    kff         TEXT,
    detail      TEXT,
    source         TEXT,
    signature      TEXT,
    record         TEXT,
    name           TEXT,
    kind           TEXT,
    size           {INT},
    content_length {INT},
    deleted        {INT},
    meta_addr      TEXT,
    first_cluster  {INT},
    extents        TEXT,
    mtime          {INT},
    atime          {INT},
    ctime          {INT},
    crtime         {INT}
);

CREATE TABLE extracted_items (
    id          {ID},
    file_id     {INT} NOT NULL REFERENCES files(id),
    parent_id   {INT},
    member      TEXT NOT NULL,
    name        TEXT NOT NULL,
    container   TEXT NOT NULL,
    size        {INT} NOT NULL,
    md5         TEXT,
    sha1        TEXT,
    sha256      TEXT,
    signature   TEXT,
    kff         TEXT
);
CREATE INDEX extracted_by_file ON extracted_items(file_id);

CREATE TABLE hits (
    id        {ID},
    item_kind TEXT NOT NULL CHECK (item_kind IN ('file', 'carved', 'evidence', 'extracted')),
    item_id   {INT} NOT NULL,
    kind      TEXT NOT NULL,
    name      TEXT NOT NULL,
    category  TEXT,
    detail    TEXT,
    count     {INT} NOT NULL DEFAULT 1
);
CREATE INDEX hits_by_item ON hits(item_kind, item_id);

CREATE TABLE processing_errors (
    id           {ID},
    run_id       {INT} REFERENCES runs(id),
    stage        TEXT NOT NULL,
    severity     TEXT NOT NULL CHECK (severity IN ('error', 'warning', 'finding')),
    item_kind    TEXT,
    item_id      {INT},
    path         TEXT,
    first_sector {INT},
    last_sector  {INT},
    message      TEXT NOT NULL
);

CREATE TABLE stage_runs (
    id             {ID},
    run_id         {INT} NOT NULL REFERENCES runs(id),
    seq            {INT} NOT NULL,
    stage          TEXT NOT NULL,
    status         TEXT NOT NULL,
    started_at     TEXT NOT NULL,
    wall_ns        {INT} NOT NULL,
    cpu_user_ns    {INT} NOT NULL,
    cpu_system_ns  {INT} NOT NULL,
    peak_rss_bytes {INT},
    items          {INT} NOT NULL,
    bytes          {INT} NOT NULL,
    summary        TEXT
);

CREATE TABLE channel_figures (
    stage_run_id     {INT} NOT NULL REFERENCES stage_runs(id),
    channel          TEXT NOT NULL,
    bytes_read       {INT} NOT NULL,
    read_ops         {INT} NOT NULL,
    bytes_written    {INT} NOT NULL,
    write_ops        {INT} NOT NULL,
    fsyncs           {INT} NOT NULL,
    read_blocked_ns  {INT} NOT NULL,
    write_blocked_ns {INT} NOT NULL,
    sync_blocked_ns  {INT} NOT NULL,
    PRIMARY KEY (stage_run_id, channel)
);
