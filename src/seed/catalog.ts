// Words of a construction company's safety records, shared by the seeder and the simulator.
// The words themselves are data, in catalog.json; this module types them and builds from them.
import type { Random } from "./random.ts"
import catalog from "./catalog.json" with { type: "json" }

export const {
  AREAS,
  BODY_PARTS,
  CHANGE_CATEGORIES,
  CHANGE_TITLES,
  CLOSE_OUT_NOTES,
  CONTROLS,
  COURSES,
  EQUIPMENT,
  FIRST_NAMES,
  INJURY_TYPES,
  JOB_SITES,
  JOB_TITLES,
  LAST_NAMES,
  MEDICAL_NOTES,
  POLICIES,
  RISK_ACTIVITIES,
  SDS_PRODUCTS,
  SUBCONTRACTOR_NAMES,
  TRADES,
  WORK_RESTRICTIONS
} = catalog

type Words = Readonly<Record<string, ReadonlyArray<string>>>
export const AUDIT_TEMPLATES: Words = catalog.AUDIT_TEMPLATES
export const CA_TITLES: Words = catalog.CA_TITLES
export const CHECKLISTS: Words = catalog.CHECKLISTS
export const OBSERVATION_TITLES: Words = catalog.OBSERVATION_TITLES
export const PERMIT_TITLES: Words = catalog.PERMIT_TITLES

export interface IncidentScenario {
  readonly title: string
  readonly what: string
  readonly injuryType?: (typeof INJURY_TYPES)[number]
  readonly bodyPart?: (typeof BODY_PARTS)[number]
}

export const INCIDENT_SCENARIOS: Readonly<Record<string, ReadonlyArray<IncidentScenario>>> = catalog.INCIDENT_SCENARIOS

export const personName = (r: Random) => `${r.pick(FIRST_NAMES)} ${r.pick(LAST_NAMES)}`

export const emailOf = (name: string, domain: string) =>
  name
    .toLowerCase()
    .normalize("NFD")
    .replace(/[^a-z ]/g, "")
    .trim()
    .replace(/\s+/g, ".") +
  "@" +
  domain

export const phone = (r: Random) => `+1 555 ${r.int(100, 999)} ${String(r.int(0, 9999)).padStart(4, "0")}`
