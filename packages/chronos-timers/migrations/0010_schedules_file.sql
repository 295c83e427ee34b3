-- The schedules file (contract §13): what the file last said about each (owner, key), the count
-- of the file's changes to each alarm, and the heads-ups owed to the agents.

-- Per (owner, key) the file ever named: its entry as last applied, normalised (defaults filled
-- in, the `at` as a UTC instant, the cron as parsed, the payload compacted with its keys sorted,
-- its numbers digit for digit), as JSON text. A reconcile compares the file's entry with this,
-- so a restart or a second instance finds it unchanged and does nothing, and an edit changes in
-- the alarm only the fields the edit changed. Kept when the entry leaves the file (removals are
-- ignored) and when the alarm is pruned (an unchanged entry does not bring it back).
CREATE TABLE schedule_file_entries (
    owner_did   TEXT NOT NULL,
    key         TEXT NOT NULL,
    entry       TEXT NOT NULL,
    -- The alarm the entry last made, changed or matched (it may have been pruned since).
    alarm_id    UUID,
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (owner_did, key)
);

-- How many times the file created or changed this alarm: n of the heads-up's `webhook-id`
-- `<alarm id>:file:<n>`.
ALTER TABLE alarms ADD COLUMN file_changes INT NOT NULL DEFAULT 0;

-- The heads-ups (`schedule.changed`), written in the transaction of the change they announce,
-- so only the instance whose change took effect owes one. Sent by the tracker like its stages:
--   lease_until  "not before": while a send is under way, the end of its lease; after a failed
--                send, when to try again. NULL: never claimed.
--   lease_token  the claim under way; an outcome is recorded only under it (fencing).
--   sent_at      set when the router answered 2xx (or the log took it, with no router).
--   failed_at    set when the router refused it for good (a 4xx other than 408 and 429).
CREATE TABLE schedule_changes (
    id           UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    -- The `webhook-id`, `<alarm id>:file:<n>`: the same on every retry.
    message_id   TEXT NOT NULL UNIQUE,
    alarm_id     UUID NOT NULL,
    owner_did    TEXT NOT NULL,
    change       TEXT NOT NULL CHECK (change IN ('created', 'updated')),
    -- The JSON body as it is sent, the alarm as the change left it (payload verbatim).
    body         TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    attempts     INT NOT NULL DEFAULT 0,
    lease_until  TIMESTAMPTZ,
    lease_token  UUID,
    last_error   TEXT NOT NULL DEFAULT '',
    sent_at      TIMESTAMPTZ,
    failed_at    TIMESTAMPTZ
);

-- Heads-ups still owed, oldest first; and finished ones, for retention.
CREATE INDEX schedule_changes_open_idx ON schedule_changes (created_at)
    WHERE sent_at IS NULL AND failed_at IS NULL;
CREATE INDEX schedule_changes_done_idx ON schedule_changes ((coalesce(sent_at, failed_at)))
    WHERE sent_at IS NOT NULL OR failed_at IS NOT NULL;
