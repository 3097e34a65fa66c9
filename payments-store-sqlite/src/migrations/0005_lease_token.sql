-- v5: the lease fencing token of outbox events. Every claim increments it; an attempt's
-- record changes the event's state and schedule only while the token it was claimed with is
-- still the event's (a holder whose lease ran out records its attempt, nothing more).
ALTER TABLE outbox_events ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0;
