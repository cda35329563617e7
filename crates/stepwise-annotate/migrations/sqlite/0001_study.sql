-- stepwise annotate: one study per database. Times are milliseconds since the Unix epoch.
CREATE TABLE tasks (
    id INTEGER PRIMARY KEY,
    instance INTEGER NOT NULL,       -- index into the study's instances.jsonl
    modality TEXT NOT NULL,          -- multimodal | text | image
    qualification INTEGER NOT NULL,  -- 1: a qualification item (known answer), 0: a study item
    needed INTEGER NOT NULL          -- judgements wanted
);
CREATE TABLE workers (
    id INTEGER PRIMARY KEY,
    label TEXT NOT NULL UNIQUE,
    invite TEXT NOT NULL UNIQUE,     -- the invite link's token
    status TEXT NOT NULL,            -- qualifying | active | failed | censored
    qualification_score REAL,
    created_ms INTEGER NOT NULL
);
CREATE TABLE hits (
    id INTEGER PRIMARY KEY,
    worker_id INTEGER NOT NULL REFERENCES workers(id),
    seq INTEGER NOT NULL,            -- the worker's HIT number, from 1
    qualification INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    done_ms INTEGER,
    UNIQUE (worker_id, seq)
);
CREATE TABLE assignments (
    id INTEGER PRIMARY KEY,
    hit_id INTEGER NOT NULL REFERENCES hits(id),
    worker_id INTEGER NOT NULL REFERENCES workers(id),
    task_id INTEGER NOT NULL REFERENCES tasks(id),
    position INTEGER NOT NULL,
    status TEXT NOT NULL,            -- open | done | discarded
    created_ms INTEGER NOT NULL,
    submitted_ms INTEGER,
    answer TEXT,                     -- canonical JSON of what was submitted
    UNIQUE (worker_id, task_id)
);
CREATE INDEX assignments_task ON assignments(task_id, status);
CREATE TABLE sessions (
    token TEXT PRIMARY KEY,
    worker_id INTEGER REFERENCES workers(id),
    admin INTEGER NOT NULL,
    csrf TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);
