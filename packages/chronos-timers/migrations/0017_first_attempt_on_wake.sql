-- A wake delivered at its first attempt keeps that attempt on its own row (issue 18: the webhook
-- path). Most wakes are delivered at once, and each such delivery added an attempt row beside
-- the update of its wake: a heap row and a primary-key entry more for every fire, when the wake's
-- own row is rewritten in the same statement anyway. The attempt's start, length and status code
-- are kept here instead, and `GET /v1/wakes/{id}/attempts` lists them as attempt 1 (when no
-- attempt row 1 exists). Any other attempt (a retry, a failure, a delivery after a retry) is
-- still a row of wake_attempts.
ALTER TABLE wakes
    ADD COLUMN first_attempt_started_at TIMESTAMPTZ,
    ADD COLUMN first_attempt_ms         INT,
    ADD COLUMN first_attempt_status     INT;
