/** Helpers for the dashboard suites: sign in over HTTP and call `/dashboard/api` with the cookie. */

export interface DashboardClient {
  readonly cookie: string
  readonly csrfToken: string
  readonly role: string
  call(method: string, path: string, options?: { body?: unknown; csrf?: string | null; headers?: Record<string, string> }): Promise<Response>
}

export const signIn = async (baseUrl: string, token: string, headers: Record<string, string> = {}) =>
  fetch(`${baseUrl}/dashboard/api/session`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ token })
  })

/** The cookie's `name=value` pair from a sign-in answer. */
export const cookieOf = (response: Response) => {
  const header = response.headers.get("set-cookie") ?? ""
  return header.split(";")[0]
}

export const dashboardClient = async (baseUrl: string, token: string): Promise<DashboardClient> => {
  const response = await signIn(baseUrl, token)
  if (response.status !== 200) throw new Error(`sign-in failed: ${response.status} ${await response.text()}`)
  const session = (await response.json()) as { csrfToken: string; role: string }
  const cookie = cookieOf(response)
  return {
    cookie,
    csrfToken: session.csrfToken,
    role: session.role,
    call: (method, path, options = {}) => {
      const csrf = options.csrf === undefined ? session.csrfToken : options.csrf
      return fetch(`${baseUrl}/dashboard/api${path}`, {
        method,
        headers: {
          cookie,
          ...(options.body === undefined ? {} : { "content-type": "application/json" }),
          ...(csrf === null ? {} : { "x-csrf-token": csrf }),
          ...options.headers
        },
        ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) })
      })
    }
  }
}

export const errorOf = async (response: Response) => ((await response.json()) as { error: { type: string; message: string } }).error
