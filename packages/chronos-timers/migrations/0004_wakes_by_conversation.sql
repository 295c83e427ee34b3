-- A reported reply acknowledges an owner's open wakes in one conversation: find them without
-- reading the owner's whole wake history.
CREATE INDEX wakes_conversation_idx ON wakes (owner_did, conversation_id)
    WHERE status IN ('pending', 'delivered');
