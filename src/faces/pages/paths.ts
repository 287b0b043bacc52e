// Every path of the admin pages, in router syntax. The admin API's known routes include
// them (src/faces/admin-api/index.ts), so an unknown method on one of them answers 405 and the
// request metrics label them by route. No imports: the admin API imports this file.

export const WEB_PREFIX = "/admin"

export const PATHS = {
  root: "/admin",
  signIn: "/admin/sign-in",
  signOut: "/admin/sign-out",
  keys: "/admin/keys",
  keyRevoke: "/admin/keys/:id/revoke",
  webhooks: "/admin/webhooks",
  endpoints: "/admin/webhooks/endpoints",
  endpoint: "/admin/webhooks/endpoints/:id",
  endpointRotate: "/admin/webhooks/endpoints/:id/rotate-secret",
  endpointDelete: "/admin/webhooks/endpoints/:id/delete",
  endpointEnable: "/admin/webhooks/endpoints/:id/enable",
  endpointTest: "/admin/webhooks/endpoints/:id/test",
  endpointReplay: "/admin/webhooks/endpoints/:id/replay",
  subscriptionReplay: "/admin/webhooks/subscriptions/:id/replay",
  replay: "/admin/webhooks/replays/:id",
  replayCancel: "/admin/webhooks/replays/:id/cancel",
  deliveryResend: "/admin/webhooks/deliveries/:id/resend",
  subscriptionDisable: "/admin/webhooks/subscriptions/:id/disable",
  subscriptionEnable: "/admin/webhooks/subscriptions/:id/enable",
  subscriptionDelete: "/admin/webhooks/subscriptions/:id/delete",
  activity: "/admin/activity",
  status: "/admin/status",
  keyPortalLink: "/admin/keys/:id/portal-link",
  portal: "/portal",
  portalLink: "/portal/:token",
  portalSignOut: "/portal/sign-out",
  portalSubscription: "/portal/subscriptions/:id",
  portalResend: "/portal/subscriptions/:id/deliveries/:deliveryId/resend",
  portalRecover: "/portal/subscriptions/:id/recover",
  portalTest: "/portal/subscriptions/:id/test",
  script: "/admin/assets/app.js",
  styles: "/admin/assets/app.css"
} as const

/** A path with its :id filled in (ids are UUIDs; encoded anyway). */
export const pathFor = (path: string, id: string): string => path.replace(":id", encodeURIComponent(id))

export const ADMIN_WEB_ROUTES: ReadonlyArray<{ readonly method: "GET" | "POST"; readonly path: string }> = [
  { method: "GET", path: PATHS.root },
  { method: "GET", path: PATHS.signIn },
  { method: "POST", path: PATHS.signIn },
  { method: "POST", path: PATHS.signOut },
  { method: "GET", path: PATHS.keys },
  { method: "POST", path: PATHS.keys },
  { method: "POST", path: PATHS.keyRevoke },
  { method: "GET", path: PATHS.webhooks },
  { method: "POST", path: PATHS.endpoints },
  { method: "GET", path: PATHS.endpoint },
  { method: "POST", path: PATHS.endpoint },
  { method: "POST", path: PATHS.endpointRotate },
  { method: "POST", path: PATHS.endpointDelete },
  { method: "POST", path: PATHS.endpointEnable },
  { method: "POST", path: PATHS.endpointTest },
  { method: "GET", path: PATHS.endpointReplay },
  { method: "POST", path: PATHS.endpointReplay },
  { method: "GET", path: PATHS.subscriptionReplay },
  { method: "POST", path: PATHS.subscriptionReplay },
  { method: "GET", path: PATHS.replay },
  { method: "POST", path: PATHS.replayCancel },
  { method: "POST", path: PATHS.deliveryResend },
  { method: "POST", path: PATHS.subscriptionDisable },
  { method: "POST", path: PATHS.subscriptionEnable },
  { method: "POST", path: PATHS.subscriptionDelete },
  { method: "GET", path: PATHS.activity },
  { method: "GET", path: PATHS.status },
  { method: "POST", path: PATHS.keyPortalLink },
  { method: "GET", path: PATHS.portal },
  { method: "GET", path: PATHS.portalLink },
  { method: "POST", path: PATHS.portalLink },
  { method: "POST", path: PATHS.portalSignOut },
  { method: "GET", path: PATHS.portalSubscription },
  { method: "POST", path: PATHS.portalResend },
  { method: "POST", path: PATHS.portalRecover },
  { method: "POST", path: PATHS.portalTest },
  { method: "GET", path: PATHS.script },
  { method: "GET", path: PATHS.styles }
]
