-- 0003: a dead letter's own position includes its topic.
--
-- 0002 identified a letter by (dl_partition, dl_offset) alone, which assumes one
-- dead-letter topic per database. Two topics (a test's private one beside the real
-- one, or a second deployment sharing the database) then collide, and ON CONFLICT DO
-- NOTHING would drop the second letter. Letters stored before this have no dl_topic
-- (NULLs never collide).

ALTER TABLE dead_letters ADD COLUMN dl_topic text;

DROP INDEX dead_letters_position;
CREATE UNIQUE INDEX dead_letters_position ON dead_letters (dl_topic, dl_partition, dl_offset);
