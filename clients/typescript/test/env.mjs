// Shared test setup: the live server's URL (CTXD_URL), unique conversation ids.
export const baseUrl = process.env.CTXD_URL;
if (!baseUrl) {
  console.error("CTXD_URL is not set (e.g. http://127.0.0.1:50051): these tests run against a live ctxd");
  process.exit(2);
}
let n = 0;
export const uniqueId = (prefix) => `ts-client/${prefix}/${process.pid}-${Date.now()}-${++n}`;
