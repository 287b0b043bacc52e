// Words of a construction company's safety records, shared by the seeder and the simulator.
import type { Random } from "./random.ts"

export const FIRST_NAMES = [
  "Maria", "James", "Aisha", "Luis", "Chen", "Olga", "Samuel", "Priya", "Tomás", "Grace", "Kwame", "Hannah",
  "Diego", "Fatima", "Erik", "Nia", "Marco", "Yuki", "Owen", "Leila", "Rafael", "Ingrid", "Ahmed", "Sofia",
  "Connor", "Mei", "Andre", "Zoe", "Pavel", "Amara", "Jonah", "Lucia", "Tariq", "Elena", "Brandon", "Ruth"
] as const

export const LAST_NAMES = [
  "Garcia", "Okafor", "Nguyen", "Schmidt", "Patel", "Johnson", "Kowalski", "Haddad", "Silva", "O'Brien",
  "Tanaka", "Mensah", "Rossi", "Andersen", "Morales", "Ivanova", "Williams", "Ali", "Dubois", "Kim",
  "Brown", "Fischer", "Santos", "Murphy", "Chen", "Lopez", "Novak", "Adeyemi", "Larsen", "Reyes"
] as const

export const personName = (r: Random) => `${r.pick(FIRST_NAMES)} ${r.pick(LAST_NAMES)}`

export const emailOf = (name: string, domain: string) =>
  name.toLowerCase().normalize("NFD").replace(/[^a-z ]/g, "").trim().replace(/\s+/g, ".") + "@" + domain

export const phone = (r: Random) => `+1 555 ${r.int(100, 999)} ${String(r.int(0, 9999)).padStart(4, "0")}`

export const JOB_SITES = [
  { name: "Riverside Medical Center", address: "1200 River Rd", city: "Portland", region: "OR" },
  { name: "Harbor Point Tower", address: "88 Harbor Blvd", city: "Seattle", region: "WA" },
  { name: "Northgate Logistics Hub", address: "4500 Northgate Way", city: "Tacoma", region: "WA" },
  { name: "Maple Street School Expansion", address: "310 Maple St", city: "Salem", region: "OR" },
  { name: "Cedar Creek Bridge", address: "Hwy 26 Mile 41", city: "Sandy", region: "OR" },
  { name: "Eastside Water Treatment Plant", address: "9 Filtration Dr", city: "Bellevue", region: "WA" },
  { name: "Union Station Renovation", address: "800 NW 6th Ave", city: "Portland", region: "OR" },
  { name: "Summit Ridge Apartments", address: "2750 Summit Ave", city: "Spokane", region: "WA" },
  { name: "Airport Cargo Apron", address: "7000 Airport Way", city: "Portland", region: "OR" },
  { name: "Lakeview Data Center", address: "15 Lakeview Pkwy", city: "Boise", region: "ID" }
] as const

export const AREAS = [
  "Level 2 east stairwell", "Loading dock", "Scaffold bay 3", "Roof deck", "Basement plant room", "Site entrance",
  "Laydown yard", "Crane pad", "Trench section B", "Formwork area", "Welding shop", "Mezzanine", "North façade",
  "Parking structure ramp", "Electrical room", "Concrete pour zone", "Tool crib", "Break area"
] as const

export const TRADES = [
  "Electrical", "Plumbing", "HVAC", "Steel erection", "Concrete", "Scaffolding", "Excavation", "Roofing",
  "Drywall", "Glazing", "Fire protection", "Demolition", "Painting", "Crane services"
] as const

export const SUBCONTRACTOR_NAMES = [
  "Volt Brothers Electric", "Pacific Pipe & Drain", "AirFlow Mechanical", "Ironclad Steel Erectors",
  "Solid Ground Concrete", "SkyHigh Scaffolding", "DeepCut Excavation", "Peak Roofing Co.", "Smoothwall Interiors",
  "ClearView Glazing", "Firewatch Sprinklers", "Wrecking Crew Demolition", "Brightcoat Painters", "Lift Masters Cranes"
] as const

export const JOB_TITLES = [
  "Carpenter", "Laborer", "Electrician", "Ironworker", "Pipefitter", "Equipment operator", "Foreman", "Site supervisor",
  "Welder", "Concrete finisher", "Scaffolder", "Safety officer", "Apprentice", "Crane operator", "Surveyor"
] as const

export const EQUIPMENT = [
  { category: "Aerial lift", names: ["Genie S-65 boom lift", "JLG 1930ES scissor lift", "Skyjack SJ3226 scissor lift"] },
  { category: "Forklift", names: ["Toyota 8FGU25 forklift", "JCB 535 telehandler"] },
  { category: "Excavator", names: ["CAT 320 excavator", "Komatsu PC138 excavator", "Kubota KX040 mini excavator"] },
  { category: "Crane", names: ["Liebherr 150 EC-B tower crane", "Grove RT765 rough terrain crane"] },
  { category: "Scaffold", names: ["Frame scaffold tower", "Mobile scaffold"] },
  { category: "Power tools", names: ["Hilti TE 60 rotary hammer", "Stihl TS 420 cut-off saw", "DeWalt table saw"] },
  { category: "Generator", names: ["Honda EU7000 generator", "Atlas Copco QAS 60 generator"] },
  { category: "Fall protection", names: ["Full body harness", "Self-retracting lifeline"] },
  { category: "Ladder", names: ["Extension ladder 24 ft", "Step ladder 8 ft"] }
] as const

export const CHECKLISTS: Readonly<Record<string, ReadonlyArray<string>>> = {
  "Aerial lift": ["Guardrails secure", "Emergency lowering works", "Tyres and wheels", "Controls labelled", "Hydraulic leaks", "Alarm and horn", "Platform gate", "Load chart present"],
  Forklift: ["Forks and chains", "Brakes", "Horn and lights", "Seatbelt", "Hydraulic leaks", "Tyres", "Fluid levels", "Data plate legible"],
  Excavator: ["Tracks and rollers", "Bucket and teeth", "Hydraulic hoses", "Mirrors and cameras", "Fire extinguisher", "Travel alarm", "Quick coupler pin"],
  Crane: ["Wire rope condition", "Hook and latch", "Limit switches", "Load moment indicator", "Outriggers", "Anemometer", "Slew brake", "Inspection tag"],
  Scaffold: ["Base plates and sole boards", "Bracing complete", "Toe boards", "Guardrails", "Access ladder", "Scaffold tag", "Ties to structure"],
  "Power tools": ["Guard in place", "Cord and plug", "Switch works", "Blade or bit condition", "PAT tag current"],
  Generator: ["Earthing", "Fuel leaks", "Exhaust clearance", "RCD test", "Cables and sockets"],
  "Fall protection": ["Webbing", "Stitching", "D-rings", "Buckles", "Label legible", "Lanyard hook"],
  Ladder: ["Stiles", "Rungs", "Feet", "Locking bars", "Labels"]
}

export const AUDIT_TEMPLATES: Readonly<Record<string, ReadonlyArray<string>>> = {
  "Weekly site safety walk": ["Housekeeping acceptable", "Walkways clear", "Edge protection in place", "PPE worn", "Signage posted", "Fire extinguishers accessible", "First aid kit stocked", "Lighting adequate", "Waste segregated", "Welfare facilities clean", "Emergency routes clear", "Barricades in place", "Material stacked safely", "Cords off the ground", "Site induction board current"],
  "Scaffold audit": ["Tag current", "Base plates", "Bracing", "Guardrails", "Toe boards", "Access", "Ties", "Loading within limits", "Inspection register"],
  "Excavation audit": ["Competent person assigned", "Shoring or sloping", "Spoil set back", "Access within 25 ft", "Atmosphere tested", "Utilities located", "Barriers around edge"],
  "Electrical safety audit": ["Lockout devices used", "Panels closed", "GFCI protection", "Temporary wiring supported", "Cords undamaged", "Qualified persons only", "Arc flash labels"],
  "Hot work audit": ["Permit displayed", "Fire watch present", "Combustibles removed", "Extinguisher within reach", "Screens in place", "Gas cylinders secured"],
  "Environmental compliance audit": ["Spill kit present", "Silt fences intact", "Washout area used", "Dust controlled", "Fuel stored in bunds", "Waste manifests filed"]
}

export const COURSES = [
  { course: "Working at Height", provider: "SafeWork Academy", months: 36 },
  { course: "OSHA 10 Construction", provider: "OSHA Outreach", months: null },
  { course: "OSHA 30 Construction", provider: "OSHA Outreach", months: null },
  { course: "First Aid and CPR", provider: "Red Cross", months: 24 },
  { course: "Confined Space Entry", provider: "SafeWork Academy", months: 12 },
  { course: "Forklift Operator", provider: "LiftCert", months: 36 },
  { course: "Aerial Work Platform", provider: "IPAF", months: 60 },
  { course: "Hot Work Safety", provider: "FireSafe Training", months: 12 },
  { course: "Excavation Competent Person", provider: "DigSafe Institute", months: 36 },
  { course: "Lockout/Tagout", provider: "In-house", months: 12 },
  { course: "Site Induction", provider: "In-house", months: 12 },
  { course: "Silica Awareness", provider: "In-house", months: null },
  { course: "Rigging and Signalling", provider: "CraneSafe", months: 60 }
] as const

export const BODY_PARTS = ["Hand", "Finger", "Wrist", "Forearm", "Shoulder", "Back", "Knee", "Ankle", "Foot", "Eye", "Head", "Neck"] as const
export const INJURY_TYPES = ["Laceration", "Sprain", "Strain", "Fracture", "Contusion", "Burn", "Puncture", "Foreign body", "Abrasion", "Dermatitis", "Heat stress", "Respiratory irritation", "Hearing loss"] as const

/**
 * What happened in an incident, told one way: its title, what the description says, and
 * (for injuries and illnesses) the injury type and, for injuries, the body part.
 */
export interface IncidentScenario {
  readonly title: string
  readonly what: string
  readonly injuryType?: (typeof INJURY_TYPES)[number]
  readonly bodyPart?: (typeof BODY_PARTS)[number]
}

export const INCIDENT_SCENARIOS: Readonly<Record<string, ReadonlyArray<IncidentScenario>>> = {
  injury: [
    { title: "Laceration from sheet metal", what: "Hand cut on a sharp edge while carrying sheet metal", injuryType: "Laceration", bodyPart: "Hand" },
    { title: "Slip on wet stair", what: "Slipped on a wet stair tread and fell onto one knee", injuryType: "Contusion", bodyPart: "Knee" },
    { title: "Struck by falling tool", what: "A spanner fell from the deck above and struck a shoulder", injuryType: "Contusion", bodyPart: "Shoulder" },
    { title: "Hand caught in pinch point", what: "Hand caught between a swinging load and the scaffold frame", injuryType: "Contusion", bodyPart: "Hand" },
    { title: "Fall from ladder", what: "Fell about two metres from a stepladder and landed on an outstretched wrist", injuryType: "Fracture", bodyPart: "Wrist" },
    { title: "Back strain lifting rebar", what: "Lower back strained lifting a bundle of rebar by hand", injuryType: "Strain", bodyPart: "Back" },
    { title: "Eye injury from grinding debris", what: "Grinding debris got past safety glasses into an eye", injuryType: "Foreign body", bodyPart: "Eye" },
    { title: "Twisted ankle on uneven ground", what: "Ankle twisted stepping onto a rut in uneven ground", injuryType: "Sprain", bodyPart: "Ankle" },
    { title: "Burn from hot work", what: "Forearm burned by weld spatter during hot work", injuryType: "Burn", bodyPart: "Forearm" },
    { title: "Finger crushed by formwork", what: "Finger crushed between two formwork panels while stripping", injuryType: "Fracture", bodyPart: "Finger" }
  ],
  illness: [
    { title: "Heat exhaustion", what: "Dizziness and nausea after a long shift in full sun", injuryType: "Heat stress" },
    { title: "Dermatitis from concrete", what: "Rash on both hands after handling wet concrete without gloves", injuryType: "Dermatitis" },
    { title: "Respiratory irritation from dust", what: "Coughing and a sore throat after cutting blocks without dust extraction", injuryType: "Respiratory irritation" },
    { title: "Noise-induced hearing complaint", what: "Ringing in the ears after a day breaking out concrete", injuryType: "Hearing loss" },
    { title: "Dehydration", what: "Headache and cramps after working through the heat without water breaks", injuryType: "Heat stress" }
  ],
  near_miss: [
    { title: "Load swung near workers", what: "A crane load swung within a metre of two workers in the slewing zone" },
    { title: "Unsecured ladder slipped", what: "An untied ladder slipped sideways while a worker was climbing it" },
    { title: "Dropped object from scaffold", what: "A coupler fell from the scaffold into a barriered area; no one was below" },
    { title: "Excavator nearly struck spotter", what: "An excavator slewed towards its spotter, who stepped clear in time" },
    { title: "Open floor penetration found", what: "An uncovered floor penetration was found on a walkway" },
    { title: "Forklift reversed without spotter", what: "A forklift reversed out of a bay without a spotter as workers passed" }
  ],
  property_damage: [
    { title: "Forklift struck racking", what: "A forklift mast struck and bent an upright of the pallet racking" },
    { title: "Excavator hit water main", what: "An excavator bucket broke an unmarked water main while digging" },
    { title: "Crane damaged façade panel", what: "A crane load brushed a façade panel and cracked it" },
    { title: "Vehicle reversed into fence", what: "A delivery truck reversed into the site fence and flattened two panels" },
    { title: "Generator fire damaged shed", what: "A generator caught fire and damaged the storage shed beside it" }
  ],
  environmental: [
    { title: "Hydraulic oil spill", what: "A burst hose spilled hydraulic oil onto open ground" },
    { title: "Concrete washout into drain", what: "A truck washed out concrete into a surface water drain" },
    { title: "Diesel leak at fuel bowser", what: "Diesel leaked from the fuel bowser's nozzle onto hardstanding" },
    { title: "Dust complaint from neighbour", what: "A neighbour complained of dust blowing off the site during cutting" },
    { title: "Silt runoff after storm", what: "Silty water ran off the site into the street after a storm" }
  ]
}

export const OBSERVATION_TITLES: Readonly<Record<string, ReadonlyArray<string>>> = {
  unsafe_act: ["Worker not wearing harness at edge", "Operating saw without guard", "Standing under suspended load", "Riding on forklift forks", "No eye protection while grinding", "Bypassing lockout"],
  unsafe_condition: ["Missing guardrail on level 3", "Trailing cables across walkway", "Blocked fire exit", "Damaged scaffold tag", "Poor lighting in stairwell", "Uncovered floor opening", "Gas cylinders unsecured"],
  safe_behavior: ["Crew held a pre-task briefing", "Spotter used for reversing truck", "Excellent housekeeping in bay 2", "Worker stopped job to report hazard", "Correct three points of contact on ladder"],
  near_miss: ["Tool dropped from height, no one below", "Truck reversed close to pedestrian", "Load slipped in sling", "Worker nearly tripped on rebar"]
}

export const CA_TITLES: Readonly<Record<string, ReadonlyArray<string>>> = {
  incident: ["Investigate root cause", "Replace damaged guard", "Retrain crew on manual handling", "Install anti-slip nosing", "Review lifting plan", "Update task risk assessment"],
  observation: ["Install missing guardrail", "Reroute cables overhead", "Clear fire exit route", "Re-brief crew on PPE", "Add lighting to stairwell", "Cover floor opening"],
  audit: ["Restock first aid kit", "Replace expired extinguisher", "Fix edge protection", "Post missing signage", "Repair barricade", "Update induction board"],
  inspection: ["Repair hydraulic leak", "Replace worn wire rope", "Fix travel alarm", "Replace damaged harness", "Re-tag scaffold", "Replace cracked ladder rung"],
  change: ["Update method statement", "Brief crews on new procedure", "Revise emergency plan", "Update permit checklist"],
  maturity_gap: ["Define contractor pre-qualification", "Establish near-miss trend review", "Formalise management walkthroughs", "Set leading indicator targets"],
  gap_analysis_import: ["Document fatigue management", "Create chemical inventory procedure", "Define competency matrix", "Review emergency drill schedule", "Write lone worker procedure", "Add hearing conservation program"],
  manual: ["Order replacement PPE", "Schedule toolbox talk", "Repaint pedestrian crossing", "Service eyewash station", "Replace site fencing"],
  assistant: ["Follow up on reported hazard", "Check scaffold after high winds", "Confirm spill kit restocked", "Verify ladder inspection tags"]
}

export const CHANGE_TITLES = [
  "Switch to pre-cast stair units", "New concrete supplier", "Temporary road closure for crane", "Change shift pattern to 4x10",
  "Introduce exoskeletons for overhead drilling", "Replace timber formwork with aluminium", "Relocate site office",
  "Add night works for pour", "New scaffold design for façade", "Change excavation method to hydro-vac",
  "Introduce drone surveys", "Update lockout procedure", "New chemical for curing", "Move laydown area"
] as const
export const CHANGE_CATEGORIES = ["process", "equipment", "personnel", "materials", "organisational", "temporary"] as const

export const PERMIT_TITLES: Readonly<Record<string, ReadonlyArray<string>>> = {
  hot_work: ["Welding steel connections", "Cutting rebar with torch", "Brazing copper pipework"],
  confined_space: ["Entry to wet well", "Tank inspection", "Manhole cleaning"],
  work_at_height: ["Façade panel install", "Roof edge repairs", "Tower crane climb"],
  electrical: ["Live panel testing", "HV switchgear isolation", "Temporary supply connection"],
  excavation: ["Trench for water main", "Foundation pit", "Utility trial holes"],
  general: ["Weekend works", "Crane lift over road", "Demolition of partition walls"]
}

export const POLICIES = [
  "Health and Safety Policy", "Drug and Alcohol Policy", "Stop Work Authority", "Fall Protection Program",
  "Hot Work Procedure", "Lockout/Tagout Program", "Heat Illness Prevention", "Respiratory Protection Program",
  "Subcontractor Safety Requirements", "Incident Reporting Procedure", "Mobile Phone Use on Site", "Silica Exposure Control Plan"
] as const

export const SDS_PRODUCTS = [
  { product: "Portland Cement Type I/II", manufacturer: "Ash Grove", hazards: ["Skin irritation", "Serious eye damage", "STOT SE 3"], signal: "danger" },
  { product: "Diesel Fuel No. 2", manufacturer: "Chevron", hazards: ["Flammable liquid", "Aspiration hazard", "Carcinogenicity"], signal: "danger" },
  { product: "WD-40 Multi-Use", manufacturer: "WD-40 Company", hazards: ["Flammable aerosol", "Aspiration hazard"], signal: "danger" },
  { product: "Acetylene", manufacturer: "Airgas", hazards: ["Flammable gas", "Gas under pressure"], signal: "danger" },
  { product: "Oxygen, compressed", manufacturer: "Airgas", hazards: ["Oxidizing gas", "Gas under pressure"], signal: "danger" },
  { product: "PVC Cement", manufacturer: "Oatey", hazards: ["Flammable liquid", "Eye irritation", "STOT SE 3"], signal: "danger" },
  { product: "Form Release Agent", manufacturer: "Nox-Crete", hazards: ["Skin irritation"], signal: "warning" },
  { product: "Curing Compound", manufacturer: "W. R. Meadows", hazards: ["Flammable liquid", "Eye irritation"], signal: "warning" },
  { product: "Epoxy Anchoring Adhesive", manufacturer: "Hilti", hazards: ["Skin sensitisation", "Eye irritation", "Aquatic chronic 2"], signal: "warning" },
  { product: "Spray Foam Insulation", manufacturer: "Great Stuff", hazards: ["Respiratory sensitisation", "Flammable aerosol"], signal: "danger" },
  { product: "Hydraulic Oil AW 46", manufacturer: "Mobil", hazards: [], signal: null },
  { product: "Mineral Spirits", manufacturer: "Klean-Strip", hazards: ["Flammable liquid", "Aspiration hazard"], signal: "danger" },
  { product: "Muriatic Acid", manufacturer: "Klean-Strip", hazards: ["Skin corrosion", "Serious eye damage", "Corrosive to metals"], signal: "danger" },
  { product: "Silicone Sealant", manufacturer: "DAP", hazards: [], signal: null },
  { product: "Propane", manufacturer: "AmeriGas", hazards: ["Flammable gas", "Gas under pressure"], signal: "danger" },
  { product: "Concrete Sealer", manufacturer: "Sika", hazards: ["Flammable liquid", "Skin irritation"], signal: "warning" },
  { product: "Asphalt Emulsion", manufacturer: "Henry", hazards: ["Eye irritation"], signal: "warning" },
  { product: "Marking Paint", manufacturer: "Rust-Oleum", hazards: ["Flammable aerosol", "Eye irritation"], signal: "danger" },
  { product: "Grout, non-shrink", manufacturer: "Five Star", hazards: ["Skin irritation", "Eye irritation"], signal: "warning" },
  { product: "Battery Acid", manufacturer: "Exide", hazards: ["Skin corrosion", "Serious eye damage"], signal: "danger" },
  { product: "Welding Wire ER70S-6", manufacturer: "Lincoln Electric", hazards: ["Carcinogenicity"], signal: "warning" },
  { product: "Two-stroke Oil", manufacturer: "Stihl", hazards: [], signal: null }
] as const

export const RISK_ACTIVITIES = [
  { title: "Steel erection", hazards: ["Fall from height", "Dropped objects", "Crane collapse", "Pinch points"] },
  { title: "Deep excavation", hazards: ["Trench collapse", "Struck by plant", "Buried services", "Hazardous atmosphere"] },
  { title: "Roofing works", hazards: ["Fall from roof edge", "Fragile roof lights", "Hot bitumen burns", "Wind"] },
  { title: "Concrete pour", hazards: ["Cement burns", "Pump line whip", "Manual handling", "Noise"] },
  { title: "Demolition", hazards: ["Structural collapse", "Asbestos exposure", "Dust", "Flying debris"] },
  { title: "Confined space entry", hazards: ["Oxygen deficiency", "Toxic gas", "Engulfment", "Difficult rescue"] },
  { title: "Electrical installation", hazards: ["Electric shock", "Arc flash", "Working at height", "Cable strikes"] },
  { title: "Tower crane operations", hazards: ["Load drop", "Overturning", "High winds", "Contact with power lines"] },
  { title: "Night works", hazards: ["Poor visibility", "Fatigue", "Traffic", "Lone working"] },
  { title: "Hot work in plant room", hazards: ["Fire", "Fumes", "Burns", "UV radiation"] }
] as const

export const CONTROLS = [
  "Guardrails and edge protection", "Exclusion zone with spotter", "Gas monitoring before and during entry", "Permit to work",
  "Trained and competent operators only", "Daily pre-use inspection", "Shoring to engineer's design", "LOTO before work",
  "Fire watch for 60 minutes after", "Respiratory protection (P3)", "Wind speed limit 20 m/s", "Task rotation and breaks"
] as const

export const WORK_RESTRICTIONS = [
  "No lifting over 10 kg for 2 weeks", "Light duties only", "No work at height until cleared", "No use of vibrating tools",
  "Seated work only for 5 days", "No driving plant"
] as const
export const MEDICAL_NOTES = [
  "Type 1 diabetic; carries glucose tablets", "Asthma; inhaler in locker", "Allergic to bee stings (EpiPen)",
  "Recovering from shoulder surgery", "Hearing aid, left ear", "Epilepsy, well controlled"
] as const

export const CLOSE_OUT_NOTES = [
  "Completed and checked on site.", "Crew briefed at toolbox talk; sign-in sheet filed.", "Replaced and re-inspected; tag updated.",
  "Procedure updated and issued to all supervisors.", "Verified by site manager during walkdown.", "Contractor fixed it the same day."
] as const
