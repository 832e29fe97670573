-- 0002: dead letters keyed by their own position on wakeline.dead-letter.
--
-- 0001 made (topic, partition, offset) of the *rejected* record unique. Letters about
-- inputs that never had an offset of their own (the brain rejects a command it already
-- took, and reports offset -1) would then collide and all but the first be dropped.
-- Each letter is one record of the dead-letter topic, so its position there is the
-- identity that makes re-projecting it a no-op. The source position stays unique only
-- where it is real (offset >= 0), per reporting service: a service that dead-letters
-- the same record again after a restart writes a second letter, not a second row.

ALTER TABLE dead_letters
  ADD COLUMN service      text,   -- who rejected the record (codec.DeadLetter.service)
  ADD COLUMN dl_partition int,    -- the letter's own position on wakeline.dead-letter
  ADD COLUMN dl_offset    bigint;

ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_topic_partition_offset_key;

CREATE UNIQUE INDEX dead_letters_position ON dead_letters (dl_partition, dl_offset);
CREATE UNIQUE INDEX dead_letters_source ON dead_letters (service, topic, partition, "offset")
  WHERE "offset" >= 0;
CREATE INDEX dead_letters_received ON dead_letters (received_at);
