-- migrate: allows ban-drop-column (blocks reads and writes of service.api_keys for under 10 ms, a catalog change): no release since the first reads the key's prefix
-- Spec 5.2: of an API key, only its SHA-256 fingerprint is stored. The first characters kept
-- to recognise a key in lists were part of the key: gone; the name and id identify a key.
alter table service.api_keys drop column prefix;
