-- v7: a version of the directory (merchants, projects, tokens, signing keys) that moves with
-- every change to it, in the transaction of the change, whoever makes it (the server, a
-- `payments-server` command on the same file). The store keeps what an authentication read
-- found, and serves it again only while this version is the one it was read at: a change of
-- any of those rows applies to the next request, as without the cache.
CREATE TABLE directory_version (
    id      INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT INTO directory_version (id, version) VALUES (1, 1);

CREATE TRIGGER merchants_version_insert AFTER INSERT ON merchants BEGIN
    UPDATE directory_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER merchants_version_update AFTER UPDATE ON merchants BEGIN
    UPDATE directory_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER merchants_version_delete AFTER DELETE ON merchants BEGIN
    UPDATE directory_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER projects_version_insert AFTER INSERT ON projects BEGIN
    UPDATE directory_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER projects_version_update AFTER UPDATE ON projects BEGIN
    UPDATE directory_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER projects_version_delete AFTER DELETE ON projects BEGIN
    UPDATE directory_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER tokens_version_insert AFTER INSERT ON tokens BEGIN
    UPDATE directory_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER tokens_version_update AFTER UPDATE ON tokens BEGIN
    UPDATE directory_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER tokens_version_delete AFTER DELETE ON tokens BEGIN
    UPDATE directory_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER signing_keys_version_insert AFTER INSERT ON signing_keys BEGIN
    UPDATE directory_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER signing_keys_version_update AFTER UPDATE ON signing_keys BEGIN
    UPDATE directory_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER signing_keys_version_delete AFTER DELETE ON signing_keys BEGIN
    UPDATE directory_version SET version = version + 1 WHERE id = 1;
END;
