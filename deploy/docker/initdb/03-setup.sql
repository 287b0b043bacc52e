-- Safety Records Service: what a DBA runs once so the service runs as role safety_records with least
-- privilege. Run it as a superuser (on a managed server, the admin user that made the role),
-- e.g. psql -v ON_ERROR_STOP=1 -d <database> -f setup.sql
--
-- Two parts: the first in the app's database (DATABASE_URL), the second in the service's own
-- database (SERVICE_DATABASE_URL: its mirror, views, outbox, deliveries, keys). With one
-- database (SERVICE_DATABASE_URL unset), run both in the app's database.
-- Print one part alone with --part app or --part service.

-- Part 1, in the app's database. It creates nothing in schema app, changes no app table,
-- and gives the role no schema, no table and no write there: only what following the app
-- needs (replication, SELECT on the columns it reads for the first snapshot, the publication).
--
-- 1. The role itself is not made here (its password is yours). Make it the provider's way:
--    PostgreSQL, Azure Database for PostgreSQL flexible server (as the server admin), Supabase:
--      create role safety_records with login replication password '...';
--    Amazon RDS / Aurora (rds.logical_replication = 1; REPLICATION cannot be set there):
--      create role safety_records with login password '...';
--      grant rds_replication to safety_records;
--    Cloud SQL (flag cloudsql.logical_decoding = on), as a member of cloudsqlsuperuser:
--      create role safety_records with login replication password '...';
--      (or: gcloud sql users create safety_records ...; then: alter role safety_records with replication;)
--    Neon (logical replication enabled in the project settings): make the role in the
--      console, CLI or API (such roles can replicate), or as the owner role:
--      create role safety_records with login password '...'; alter role safety_records with replication;
--    The role needs nothing else: no superuser, no CREATE on the database.

begin;

-- 2. Reading the app's tables: SELECT on the columns the service reads, nothing more.
--    Never granted (never sent, so never read): files, photos, signatures, voice notes,
--    workers' phones and e-mails, QR codes, medical data:
--      app.job_sites: qr_code
--      app.subcontractors: contact_phone, contact_email
--      app.subcontractor_documents: file_url
--      app.workers: phone, email, photo_url, qr_code, work_restrictions, medical_notes
--      app.incidents: photos, voice_note_url, signature, work_restrictions
--      app.observations: photos, voice_note_url
--      app.audits: signature
--      app.audit_items: photos
--      app.equipment: qr_code
--      app.inspections: signature, photos
--      app.inspection_items: photo
--      app.changes: attachments
--      app.corrective_actions: evidence_photos, signature
--      app.training_records: certificate_file, signature
--      app.permits: signature
--      app.policies: document_file
--      app.policy_acknowledgements: signature
--      app.sds: file_url, qr_code
grant usage on schema app to safety_records;
grant select (id, name, host, tier, api_enabled, created_at) on app.companies to safety_records;
grant select (company_id, module, enabled) on app.company_modules to safety_records;
grant select (id, company_id, name, email, role, created_at) on app.users to safety_records;
grant select (id, company_id, name, address, city, region, country, active, created_at, updated_at) on app.job_sites to safety_records;
grant select (id, company_id, name, job_title, employer, subcontractor_id, job_site_id, status, created_at, updated_at) on app.workers to safety_records;
grant select (id, company_id, reference, type, title, description, occurred_at, job_site_id, location, person_name, worker_id, body_part, injury_type, severity, privacy_case, osha_recordable, status, reported_by, reported_via, created_at, updated_at) on app.incidents to safety_records;
grant select (id, company_id, type, title, description, job_site_id, location, observed_at, observed_by, reported_via, status, created_at, updated_at) on app.observations to safety_records;
grant select (id, company_id, title, description, source, status, priority, due_date, completed_at, close_out_notes, owner, incident_id, observation_id, audit_item_id, inspection_id, change_id, created_at, updated_at) on app.corrective_actions to safety_records;
grant select (id, company_id, title, template, job_site_id, performed_by, performed_at, score, notes, via, created_at, updated_at) on app.audits to safety_records;
grant select (id, audit_id, position, item, result, note, created_at) on app.audit_items to safety_records;
grant select (id, company_id, name, identifier, category, job_site_id, created_at, updated_at) on app.equipment to safety_records;
grant select (id, company_id, equipment_id, checklist, performed_by, performed_at, outcome, notes, via, created_at, updated_at) on app.inspections to safety_records;
grant select (id, inspection_id, position, item, result, note, created_at) on app.inspection_items to safety_records;
grant select (id, company_id, worker_id, course, provider, completed_at, expires_at, via, created_at, updated_at) on app.training_records to safety_records;
grant select (id, company_id, title, description, category, status, requested_by, approved_by, approved_at, implemented_at, job_site_id, created_at, updated_at) on app.changes to safety_records;
grant select (id, company_id, type, title, description, job_site_id, location, status, requested_by, approved_by, approved_at, valid_from, valid_to, closed_at, created_at, updated_at) on app.permits to safety_records;
grant select (id, company_id, title, version, status, effective_at, created_at, updated_at) on app.policies to safety_records;
grant select (id, policy_id, worker_id, acknowledged_at, created_at) on app.policy_acknowledgements to safety_records;
grant select (id, company_id, product_name, manufacturer, revision_at, hazard_classes, signal_word, job_site_id, created_at, updated_at) on app.sds to safety_records;
grant select (id, company_id, title, activity, job_site_id, assessed_by, assessed_at, review_at, risk_level, hazards, status, created_at, updated_at) on app.risk_assessments to safety_records;
grant select (id, company_id, name, trade, status, contact_name, created_at, updated_at) on app.subcontractors to safety_records;
grant select (id, subcontractor_id, kind, status, expires_at, created_at) on app.subcontractor_documents to safety_records;

-- 3. The publication capture reads: the same columns, NEVER columns left out, so they never
--    even reach the change stream. Making it needs the app tables' owner or a superuser.
--    The service checks it at every start and refuses one that carries more or less.
do $$
begin
  if not exists (select 1 from pg_publication where pubname = 'safety_records_service') then
    create publication safety_records_service for table app.companies (id, name, host, tier, api_enabled, created_at),
      app.company_modules (company_id, module, enabled),
      app.users (id, company_id, name, email, role, created_at),
      app.job_sites (id, company_id, name, address, city, region, country, active, created_at, updated_at),
      app.workers (id, company_id, name, job_title, employer, subcontractor_id, job_site_id, status, created_at, updated_at),
      app.incidents (id, company_id, reference, type, title, description, occurred_at, job_site_id, location, person_name, worker_id, body_part, injury_type, severity, privacy_case, osha_recordable, status, reported_by, reported_via, created_at, updated_at),
      app.observations (id, company_id, type, title, description, job_site_id, location, observed_at, observed_by, reported_via, status, created_at, updated_at),
      app.corrective_actions (id, company_id, title, description, source, status, priority, due_date, completed_at, close_out_notes, owner, incident_id, observation_id, audit_item_id, inspection_id, change_id, created_at, updated_at),
      app.audits (id, company_id, title, template, job_site_id, performed_by, performed_at, score, notes, via, created_at, updated_at),
      app.audit_items (id, audit_id, position, item, result, note, created_at),
      app.equipment (id, company_id, name, identifier, category, job_site_id, created_at, updated_at),
      app.inspections (id, company_id, equipment_id, checklist, performed_by, performed_at, outcome, notes, via, created_at, updated_at),
      app.inspection_items (id, inspection_id, position, item, result, note, created_at),
      app.training_records (id, company_id, worker_id, course, provider, completed_at, expires_at, via, created_at, updated_at),
      app.changes (id, company_id, title, description, category, status, requested_by, approved_by, approved_at, implemented_at, job_site_id, created_at, updated_at),
      app.permits (id, company_id, type, title, description, job_site_id, location, status, requested_by, approved_by, approved_at, valid_from, valid_to, closed_at, created_at, updated_at),
      app.policies (id, company_id, title, version, status, effective_at, created_at, updated_at),
      app.policy_acknowledgements (id, policy_id, worker_id, acknowledged_at, created_at),
      app.sds (id, company_id, product_name, manufacturer, revision_at, hazard_classes, signal_word, job_site_id, created_at, updated_at),
      app.risk_assessments (id, company_id, title, activity, job_site_id, assessed_by, assessed_at, review_at, risk_level, hazards, status, created_at, updated_at),
      app.subcontractors (id, company_id, name, trade, status, contact_name, created_at, updated_at),
      app.subcontractor_documents (id, subcontractor_id, kind, status, expires_at, created_at) with (publish = 'insert, update, delete, truncate');
  end if;
end
$$;

commit;

-- Then start the service with DATABASE_URL=postgres://safety_records:<password>@<host>/<the app's database>
-- and SERVICE_DATABASE_URL=postgres://safety_records:<password>@<host>/<the service's database>
-- (DATABASE_URL alone with one database; PUBLICATION=safety_records_service unless that is the default).
-- It creates its replication slot itself.
