-- The payload limits hold for what is stored (contract §5, third edition; issue 45). JSONB writes a
-- number out digit by digit, so `{"a": [1e99999, …]}`, 48 KB as sent, was stored and then given
-- back as hundreds of megabytes: every read and every claim of that row crashed the process.
-- The service now refuses such a payload (400 on `payload`); this migration deals with rows
-- stored before that, and makes the database refuse them too, whatever path writes them.
--
-- payload_stored_bytes(p) is the length of p::text, computed member by member and given up as
-- soon as it passes the limit, so a row of hundreds of megabytes is measured without rendering
-- it whole; past 64 levels of nesting it answers -1 (too deep) without going further down.
CREATE OR REPLACE FUNCTION payload_stored_bytes(p jsonb, depth int DEFAULT 1, budget bigint DEFAULT 65536)
RETURNS bigint LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    total bigint := 2;
    member record;
    inner_bytes bigint;
    n int := 0;
BEGIN
    IF jsonb_typeof(p) NOT IN ('object', 'array') THEN
        RETURN octet_length(p::text);
    END IF;
    IF depth > 64 THEN
        RETURN -1;
    END IF;
    IF jsonb_typeof(p) = 'object' THEN
        FOR member IN SELECT key, value FROM jsonb_each(p) LOOP
            inner_bytes := payload_stored_bytes(member.value, depth + 1, budget - total);
            IF inner_bytes < 0 THEN RETURN -1; END IF;
            total := total + inner_bytes + octet_length(to_jsonb(member.key)::text) + 2
                     + CASE WHEN n > 0 THEN 2 ELSE 0 END;
            n := n + 1;
            IF total > budget THEN RETURN total; END IF;
        END LOOP;
    ELSE
        FOR member IN SELECT value FROM jsonb_array_elements(p) LOOP
            inner_bytes := payload_stored_bytes(member.value, depth + 1, budget - total);
            IF inner_bytes < 0 THEN RETURN -1; END IF;
            total := total + inner_bytes + CASE WHEN n > 0 THEN 2 ELSE 0 END;
            n := n + 1;
            IF total > budget THEN RETURN total; END IF;
        END LOOP;
    END IF;
    RETURN total;
END
$$;

-- Rows already past a limit: a live one is failed (a final status: never claimed again), and
-- every one keeps '{}' instead, with last_error saying what was there.
UPDATE alarms a
   SET status = CASE WHEN a.status IN ('active', 'paused') THEN 'failed' ELSE a.status END,
       claimed_at = NULL,
       last_error = CASE
           WHEN m.bytes < 0 THEN 'payload was nested deeper than 64 levels as stored; replaced by {}'
           ELSE 'payload was at least ' || m.bytes || ' bytes as stored, over the 64 KiB limit; replaced by {}'
       END,
       payload = '{}'::jsonb,
       updated_at = now()
  FROM (SELECT id, payload_stored_bytes(payload) AS bytes FROM alarms) m
 WHERE m.id = a.id AND (m.bytes < 0 OR m.bytes > 65536);

-- And none again, by any path. Cheap for an ordinary payload: `octet_length(payload::text)`
-- renders it once (a few hundred bytes), and the depth test walks at most 64 levels.
ALTER TABLE alarms ADD CONSTRAINT alarms_payload_stored_limits CHECK (
    octet_length(payload::text) <= 65536
    AND NOT jsonb_path_exists(payload, 'strict $.**{64} ? (@.type() == "object" || @.type() == "array")')
);
