// How values read: enum names without their prefix, times in UTC, numbers grouped.

import type { DescEnum } from "@bufbuild/protobuf";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";

/** The enum value's proto name without the enum's prefix, lower case: ROLE_TOOL -> "tool". */
export function enumLabel(desc: DescEnum, value: number): string {
  const v = desc.values.find((x) => x.number === value);
  if (!v) return String(value);
  return v.name.slice(desc.sharedPrefix?.length ?? 0).toLowerCase().replaceAll("_", " ");
}

/** The enum value's full proto name, e.g. FORMAT_GEMINI (what JSON requests carry). */
export function enumName(desc: DescEnum, value: number): string {
  return desc.values.find((x) => x.number === value)?.name ?? String(value);
}

/** A timestamp as `2025-01-31 14:05:09.123Z`, or "—" when unset. */
export function time(ts: Timestamp | undefined): string {
  if (!ts) return "—";
  return timestampDate(ts).toISOString().replace("T", " ");
}

/** A count with thousands separators. */
export function num(n: number | bigint): string {
  return typeof n === "bigint" ? n.toLocaleString("en-US") : n.toLocaleString("en-US");
}

/** JSON text pretty-printed when it parses, else as it is. */
export function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** Tool arguments: on one line when short, pretty-printed when long, as they are if not JSON. */
export function argumentsText(text: string): string {
  try {
    const value: unknown = JSON.parse(text);
    const line = JSON.stringify(value);
    return line.length <= 100 ? line : JSON.stringify(value, null, 2);
  } catch {
    return text;
  }
}

/** UTF-8 length of a string. */
export function utf8Length(text: string): number {
  return new TextEncoder().encode(text).length;
}
