// @vercel/oidc ships CommonJS only, which a browser cannot import; the AI SDK's gateway provider (unused by this
// page, which talks to its own backend) imports two names from it. This stands in for it in the import map.
export function getContext() {
  return {};
}

export async function getVercelOidcToken() {
  throw new Error("no Vercel OIDC token in the browser");
}
