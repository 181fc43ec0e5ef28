/* The payload: its schema (payload.schema.json, the file Python checks with jsonschema, embedded here when the
   script is joined), the checker of the part of JSON Schema it uses, and the decoding of an encoded payload. */

import SCHEMA from "../payload.schema.json" with { type: "json" };

export const PAYLOAD_SCHEMA = SCHEMA;
export const PAYLOAD_VERSION = 2;

const typeOf = (item) => (Array.isArray(item) ? "array" : item === null ? "null" : typeof item);

function typeProblem(value, schema, where) {
  const kind = typeOf(value);
  const fits = (type) => (type === "integer" ? Number.isInteger(value)
    : type === "number" ? kind === "number" && Number.isFinite(value) : kind === type);
  const types = [].concat(schema.type);
  return types.some(fits) ? null : `${where} should be ${types.join(" or ")}, not ${kind}`;
}

function arrayProblem(value, schema, where) {
  if (schema.minItems !== undefined && value.length < schema.minItems) return `${where} has too few items`;
  if (schema.maxItems !== undefined && value.length > schema.maxItems) return `${where} has too many items`;
  if (schema.items) {
    for (let index = 0; index < value.length; index += 1) {
      const found = schemaProblem(value[index], schema.items, `${where}[${index}]`);
      if (found) return found;
    }
  }
  return null;
}

function objectProblem(value, schema, where) {
  for (const name of schema.required || []) if (!(name in value)) return `${where} lacks "${name}"`;
  for (const [name, item] of Object.entries(value)) {
    const inner = (schema.properties || {})[name] || schema.additionalProperties;
    const found = inner && typeof inner === "object" ? schemaProblem(item, inner, `${where}.${name}`) : null;
    if (found) return found;
  }
  return null;
}

/* The part of JSON Schema the payload's schema uses: type, enum, required, properties, additionalProperties,
   items, minItems, maxItems, minimum, pattern, allOf and if/then. Returns the first problem found, or null. */
export function schemaProblem(value, schema, where) {
  if (schema.enum && !schema.enum.some((option) => option === value)) {
    return `${where} is ${JSON.stringify(value)}, not one of ${JSON.stringify(schema.enum)}`;
  }
  const wrongType = schema.type ? typeProblem(value, schema, where) : null;
  if (wrongType) return wrongType;
  if (schema.minimum !== undefined && value < schema.minimum) return `${where} is below ${schema.minimum}`;
  if (schema.pattern && !new RegExp(schema.pattern).test(value)) return `${where} does not match ${schema.pattern}`;
  const inside = Array.isArray(value) ? arrayProblem(value, schema, where)
    : value && typeof value === "object" ? objectProblem(value, schema, where) : null;
  if (inside) return inside;
  for (const part of schema.allOf || []) {
    if (part.if && schemaProblem(value, part.if, where) === null) {
      const found = schemaProblem(value, part.then, where);
      if (found) return found;
    }
  }
  return null;
}

export function checkPayload(payload) {
  const found = schemaProblem(payload, PAYLOAD_SCHEMA, "the payload");
  if (found) throw new Error(`${found} (this file draws payload version ${PAYLOAD_VERSION})`);
  return payload;
}

/* An encoded payload (base64 of gzip bytes: a 4-byte little-endian length, the JSON, then the map weights) as
   {...the JSON, weights: Uint8Array}, checked against the schema. */
export async function readPayload(encoded) {
  if (typeof encoded !== "string" || !/^[A-Za-z0-9+/=\s]+$/.test(encoded)) {
    throw new Error("the view's data is not base64 text");
  }
  const bytes = Uint8Array.from(atob(encoded.trim()), (character) => character.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  const raw = new Uint8Array(await new Response(stream).arrayBuffer());
  if (raw.length < 4) throw new Error("the view's data is cut short");
  const length = new DataView(raw.buffer, raw.byteOffset, 4).getUint32(0, true);
  if (4 + length > raw.length) throw new Error("the view's data is cut short");
  const payload = checkPayload(JSON.parse(new TextDecoder().decode(raw.subarray(4, 4 + length))));
  payload.weights = raw.subarray(4 + length);
  return payload;
}
