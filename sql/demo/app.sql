-- The DEMO copy of the safety app's tables, as the service reads them (docs/api.md#resources;
-- the columns marked NEVER: docs/privacy.md#never-columns). In production these tables
-- already exist and belong to the app; the service never creates or alters them. This file is
-- applied only on request, to make a demo or test database: by the embedded first start,
-- `npm run seed` and `npm run seed -- --schema-only`. Then anyone can play the app with plain SQL.
create schema app;

create table app.companies (
  id uuid primary key default gen_random_uuid(),
  name text not null,
  host text not null unique,
  tier text not null default 'company' check (tier in ('starter', 'team', 'company')),
  api_enabled boolean not null default true,
  created_at timestamptz not null default now()
);

create table app.company_modules (
  company_id uuid not null references app.companies(id) on delete cascade,
  module text not null check (module in ('incidents', 'observations', 'corrective-actions', 'audits',
    'inspections', 'training-records', 'workers', 'job-sites', 'changes', 'permits', 'policies', 'sds',
    'risk-assessments', 'subcontractors')),
  enabled boolean not null default true,
  primary key (company_id, module)
);

create table app.users (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null references app.companies(id) on delete cascade,
  name text not null,
  email text not null,
  role text not null default 'member' check (role in ('admin', 'member')),
  created_at timestamptz not null default now(),
  unique (company_id, email)
);

create table app.job_sites (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null references app.companies(id) on delete cascade,
  name text not null,
  address text,
  city text,
  region text,
  country text,
  active boolean not null default true,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  qr_code text -- NEVER
);

create table app.subcontractors (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null references app.companies(id) on delete cascade,
  name text not null,
  trade text,
  status text not null default 'active' check (status in ('active', 'inactive')),
  contact_name text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  contact_phone text, -- NEVER
  contact_email text  -- NEVER
);

create table app.subcontractor_documents (
  id uuid primary key default gen_random_uuid(),
  subcontractor_id uuid not null references app.subcontractors(id) on delete cascade,
  kind text not null check (kind in ('insurance', 'license', 'safety_program', 'other')),
  status text not null default 'pending' check (status in ('pending', 'approved', 'rejected', 'expired')),
  expires_at timestamptz,
  created_at timestamptz not null default now(),
  file_url text -- NEVER
);

create table app.workers (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null references app.companies(id) on delete cascade,
  name text not null,
  job_title text,
  employer text,
  subcontractor_id uuid references app.subcontractors(id) on delete set null,
  job_site_id uuid references app.job_sites(id) on delete set null,
  status text not null default 'active' check (status in ('active', 'inactive')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  phone text,             -- NEVER
  email text,             -- NEVER
  photo_url text,         -- NEVER
  qr_code text,           -- NEVER
  work_restrictions text, -- NEVER
  medical_notes text      -- NEVER
);

create table app.incidents (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null references app.companies(id) on delete cascade,
  reference text not null,
  type text not null check (type in ('injury', 'illness', 'near_miss', 'property_damage', 'environmental')),
  title text not null,
  description text,
  occurred_at timestamptz not null,
  job_site_id uuid references app.job_sites(id) on delete set null,
  location text,
  person_name text,
  worker_id uuid references app.workers(id) on delete set null,
  body_part text,
  injury_type text,
  severity text not null check (severity in ('minor', 'moderate', 'serious', 'critical')),
  privacy_case boolean not null default false,
  osha_recordable boolean not null default false,
  status text not null default 'open' check (status in ('open', 'investigating', 'closed')),
  reported_by text,
  reported_via text not null default 'app' check (reported_via in ('app', 'qr', 'assistant')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  photos text[],          -- NEVER
  voice_note_url text,    -- NEVER
  signature text,         -- NEVER
  work_restrictions text  -- NEVER
);

create table app.observations (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null references app.companies(id) on delete cascade,
  type text not null check (type in ('unsafe_act', 'unsafe_condition', 'safe_behavior', 'near_miss')),
  title text not null,
  description text,
  job_site_id uuid references app.job_sites(id) on delete set null,
  location text,
  observed_at timestamptz not null,
  observed_by text,
  reported_via text not null default 'app' check (reported_via in ('app', 'qr', 'assistant')),
  status text not null default 'open' check (status in ('open', 'closed')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  photos text[],       -- NEVER
  voice_note_url text  -- NEVER
);

create table app.audits (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null references app.companies(id) on delete cascade,
  title text not null,
  template text,
  job_site_id uuid references app.job_sites(id) on delete set null,
  performed_by text,
  performed_at timestamptz not null,
  score numeric check (score >= 0 and score <= 100),
  notes text,
  via text not null default 'app' check (via in ('app', 'offline_upload')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  signature text -- NEVER
);

create table app.audit_items (
  id uuid primary key default gen_random_uuid(),
  audit_id uuid not null references app.audits(id) on delete cascade,
  position integer not null,
  item text not null,
  result text not null check (result in ('pass', 'fail', 'na')),
  note text,
  created_at timestamptz not null default now(),
  photos text[] -- NEVER
);

create table app.equipment (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null references app.companies(id) on delete cascade,
  name text not null,
  identifier text,
  category text,
  job_site_id uuid references app.job_sites(id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  qr_code text -- NEVER
);

create table app.inspections (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null references app.companies(id) on delete cascade,
  equipment_id uuid references app.equipment(id) on delete set null,
  checklist text,
  performed_by text,
  performed_at timestamptz not null,
  outcome text not null check (outcome in ('pass', 'fail', 'needs_attention')),
  notes text,
  via text not null default 'app' check (via in ('app', 'offline_upload')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  signature text, -- NEVER
  photos text[]   -- NEVER
);

create table app.inspection_items (
  id uuid primary key default gen_random_uuid(),
  inspection_id uuid not null references app.inspections(id) on delete cascade,
  position integer not null,
  item text not null,
  result text not null check (result in ('pass', 'fail', 'na')),
  note text,
  created_at timestamptz not null default now(),
  photo text -- NEVER
);

create table app.changes (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null references app.companies(id) on delete cascade,
  title text not null,
  description text,
  category text,
  status text not null default 'draft'
    check (status in ('draft', 'submitted', 'approved', 'rejected', 'implemented', 'closed')),
  requested_by text,
  approved_by text,
  approved_at timestamptz,
  implemented_at timestamptz,
  job_site_id uuid references app.job_sites(id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  attachments text[] -- NEVER
);

create table app.corrective_actions (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null references app.companies(id) on delete cascade,
  title text not null,
  description text,
  source text not null check (source in ('incident', 'observation', 'audit', 'inspection', 'change',
    'maturity_gap', 'gap_analysis_import', 'manual', 'assistant')),
  status text not null default 'open' check (status in ('open', 'in_progress', 'completed', 'verified')),
  priority text not null default 'medium' check (priority in ('low', 'medium', 'high', 'critical')),
  due_date timestamptz,
  completed_at timestamptz,
  close_out_notes text,
  owner text,
  incident_id uuid references app.incidents(id) on delete set null,
  observation_id uuid references app.observations(id) on delete set null,
  audit_item_id uuid references app.audit_items(id) on delete set null,
  inspection_id uuid references app.inspections(id) on delete set null,
  change_id uuid references app.changes(id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  evidence_photos text[], -- NEVER
  signature text          -- NEVER
);

create table app.training_records (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null references app.companies(id) on delete cascade,
  worker_id uuid references app.workers(id) on delete set null,
  course text not null,
  provider text,
  completed_at timestamptz not null,
  expires_at timestamptz,
  via text not null default 'training_page' check (via in ('training_page', 'qr_course')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  certificate_file text, -- NEVER
  signature text         -- NEVER
);

create table app.permits (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null references app.companies(id) on delete cascade,
  type text not null check (type in ('hot_work', 'confined_space', 'work_at_height', 'electrical',
    'excavation', 'general')),
  title text not null,
  description text,
  job_site_id uuid references app.job_sites(id) on delete set null,
  location text,
  status text not null default 'requested'
    check (status in ('requested', 'approved', 'active', 'closed', 'cancelled', 'rejected')),
  requested_by text,
  approved_by text,
  approved_at timestamptz,
  valid_from timestamptz,
  valid_to timestamptz,
  closed_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  signature text -- NEVER
);

create table app.policies (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null references app.companies(id) on delete cascade,
  title text not null,
  version text,
  status text not null default 'draft' check (status in ('draft', 'published', 'archived')),
  effective_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  document_file text -- NEVER
);

create table app.policy_acknowledgements (
  id uuid primary key default gen_random_uuid(),
  policy_id uuid not null references app.policies(id) on delete cascade,
  worker_id uuid references app.workers(id) on delete set null,
  acknowledged_at timestamptz not null default now(),
  created_at timestamptz not null default now(),
  signature text -- NEVER
);

create table app.sds (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null references app.companies(id) on delete cascade,
  product_name text not null,
  manufacturer text,
  revision_at timestamptz,
  hazard_classes text[] not null default '{}',
  signal_word text check (signal_word in ('danger', 'warning')),
  job_site_id uuid references app.job_sites(id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  file_url text, -- NEVER
  qr_code text   -- NEVER
);

create table app.risk_assessments (
  id uuid primary key default gen_random_uuid(),
  company_id uuid not null references app.companies(id) on delete cascade,
  title text not null,
  activity text,
  job_site_id uuid references app.job_sites(id) on delete set null,
  assessed_by text,
  assessed_at timestamptz not null,
  review_at timestamptz,
  risk_level text not null check (risk_level in ('low', 'medium', 'high', 'extreme')),
  hazards jsonb not null default '[]',
  status text not null default 'draft' check (status in ('draft', 'approved', 'archived')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

-- Indexes the app itself would want for its foreign keys.
create index on app.users (company_id);
create index on app.job_sites (company_id);
create index on app.workers (company_id);
create index on app.incidents (company_id);
create index on app.observations (company_id);
create index on app.audits (company_id);
create index on app.audit_items (audit_id, position);
create index on app.equipment (company_id);
create index on app.equipment (job_site_id);
create index on app.inspections (company_id);
create index on app.inspections (equipment_id);
create index on app.inspection_items (inspection_id, position);
create index on app.changes (company_id);
create index on app.corrective_actions (company_id);
create index on app.training_records (company_id);
create index on app.permits (company_id);
create index on app.policies (company_id);
create index on app.policy_acknowledgements (policy_id);
create index on app.sds (company_id);
create index on app.risk_assessments (company_id);
create index on app.subcontractors (company_id);
create index on app.subcontractor_documents (subcontractor_id);
