-- The queue of wanted judgements, kept as counts so that handing out a HIT reads an index instead of
-- counting every assignment (and so that several server processes on one database agree on it).
-- tasks.held: judgements a study item holds (submitted, plus open ones not past the assignment timeout);
-- assignments.holds: 1 while the assignment counts in its item's `held`; wanted: per modality, the judgements
-- still wanted (sum over study items of needed - held where positive).
ALTER TABLE tasks ADD COLUMN held BIGINT NOT NULL DEFAULT 0;
ALTER TABLE assignments ADD COLUMN holds BIGINT NOT NULL DEFAULT 0;
UPDATE assignments SET holds = 1
    WHERE status IN ('open', 'done') AND task_id IN (SELECT id FROM tasks WHERE qualification = 0);
UPDATE tasks SET held = (SELECT COUNT(*) FROM assignments a WHERE a.task_id = tasks.id AND a.holds = 1);
CREATE TABLE wanted (
    modality TEXT PRIMARY KEY,
    remaining BIGINT NOT NULL
);
INSERT INTO wanted (modality, remaining)
    SELECT modality, SUM(CASE WHEN needed > held THEN needed - held ELSE 0 END) FROM tasks
    WHERE qualification = 0 GROUP BY modality;
CREATE INDEX tasks_wanted ON tasks(modality, id) WHERE qualification = 0 AND held < needed;
CREATE INDEX tasks_instance ON tasks(instance);
CREATE INDEX assignments_holding ON assignments(created_ms) WHERE status = 'open' AND holds = 1;
CREATE INDEX assignments_hit ON assignments(hit_id, position);
