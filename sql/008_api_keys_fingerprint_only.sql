-- Spec 5.2: of an API key, only its SHA-256 fingerprint is stored. The first characters kept
-- to recognise a key in lists were part of the key: gone; the name and id identify a key.
alter table service.api_keys drop column prefix;
