-- v2: a project can be paused (decisions.md: a paused merchant or project is
-- 422 payment_not_routable) independently of being active.
ALTER TABLE projects ADD COLUMN paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1));
