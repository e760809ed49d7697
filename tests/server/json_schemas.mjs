// The JSON Schemas of the structured-output tests (json_schema.test.mjs),
// from a single type to a nested document with references: each is run
// with many seeds on a random-weight model, which writes anything the
// grammar allows, and every output must pass a standard validator (ajv,
// JSON Schema 2020-12, with ajv-formats).
export const SCHEMAS = [
  { name: 'boolean', schema: { type: 'boolean' } },
  { name: 'bounded integer', schema: { type: 'integer', minimum: -50, maximum: 50 } },
  { name: 'enum', schema: { enum: ['red', 'green', 'blue', 3, null] } },
  { name: 'short string', schema: { type: 'string', maxLength: 12 } },
  { name: 'string with a length range', schema: { type: 'string', minLength: 3, maxLength: 6 } },
  { name: 'bounded number', schema: { type: 'number', minimum: -2.5, exclusiveMaximum: 100 } },
  { name: 'nullable type list', schema: { type: ['integer', 'null'], minimum: 0, maximum: 9 } },
  { name: 'array of integers', schema: { type: 'array', items: { type: 'integer' }, minItems: 1, maxItems: 4 } },
  {
    name: 'person',
    schema: {
      type: 'object',
      properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer', minimum: 0, maximum: 130 } },
      required: ['name', 'age'],
    },
  },
  {
    name: 'optional members, closed',
    schema: {
      type: 'object',
      properties: { a: { type: 'boolean' }, b: { type: 'null' }, c: { const: 'x' }, d: { enum: [1, 2] } },
      additionalProperties: false,
    },
  },
  { name: 'pattern', schema: { type: 'string', pattern: '^[A-Z]{3}-\\d{2,4}$' } },
  {
    name: 'formats',
    schema: {
      type: 'object',
      properties: {
        day: { type: 'string', format: 'date' },
        at: { type: 'string', format: 'time' },
        when: { type: 'string', format: 'date-time' },
        id: { type: 'string', format: 'uuid' },
        ip: { type: 'string', format: 'ipv4' },
      },
      required: ['day', 'at', 'when', 'id', 'ip'],
    },
  },
  {
    name: 'email and hostname',
    schema: {
      type: 'object',
      properties: { mail: { type: 'string', format: 'email' }, host: { type: 'string', format: 'hostname' } },
      required: ['mail', 'host'],
    },
  },
  {
    name: 'tuple',
    schema: {
      type: 'array',
      prefixItems: [{ type: 'integer', minimum: 1, maximum: 12 }, { enum: ['jan', 'feb'] }, { type: 'boolean' }],
      items: false,
      minItems: 2,
    },
  },
  {
    name: 'anyOf',
    schema: { anyOf: [{ type: 'integer', minimum: 100 }, { type: 'string', maxLength: 4 }, { type: 'null' }] },
  },
  {
    name: 'tagged union (oneOf)',
    schema: {
      oneOf: [
        {
          type: 'object',
          properties: { kind: { const: 'circle' }, r: { type: 'number', minimum: 0, maximum: 10 } },
          required: ['kind', 'r'],
        },
        {
          type: 'object',
          properties: { kind: { const: 'square' }, side: { type: 'integer', minimum: 1, maximum: 9 } },
          required: ['kind', 'side'],
        },
      ],
    },
  },
  {
    name: 'nested arrays of objects',
    schema: {
      type: 'array',
      maxItems: 3,
      items: {
        type: 'object',
        properties: {
          id: { type: 'integer', minimum: 1 },
          tags: { type: 'array', items: { type: 'string', maxLength: 5 }, maxItems: 2 },
        },
        required: ['id'],
      },
    },
  },
  {
    name: '$defs and $ref',
    schema: {
      $defs: {
        point: {
          type: 'object',
          properties: { x: { type: 'number', minimum: -1, maximum: 1 }, y: { type: 'number', minimum: -1, maximum: 1 } },
          required: ['x', 'y'],
        },
      },
      type: 'object',
      properties: { from: { $ref: '#/$defs/point' }, to: { $ref: '#/$defs/point' } },
      required: ['from', 'to'],
    },
  },
  {
    name: 'allOf',
    schema: {
      allOf: [
        { type: 'object', properties: { id: { type: 'integer', minimum: 0 } }, required: ['id'] },
        { properties: { label: { type: 'string', maxLength: 8 } }, required: ['label'] },
        { properties: { id: { maximum: 99 } } },
      ],
    },
  },
  {
    name: 'additionalProperties schema',
    schema: {
      type: 'object',
      properties: { id: { type: 'integer', minimum: 0, maximum: 999 } },
      required: ['id'],
      additionalProperties: { type: 'integer', minimum: 0, maximum: 9 },
      maxProperties: 4,
    },
  },
  {
    name: 'recursive tree',
    schema: {
      $defs: {
        node: {
          type: 'object',
          properties: {
            v: { type: 'integer', minimum: 0, maximum: 9 },
            kids: { type: 'array', items: { $ref: '#/$defs/node' }, maxItems: 2 },
          },
          required: ['v'],
        },
      },
      $ref: '#/$defs/node',
    },
  },
  {
    name: 'invoice',
    schema: {
      $defs: {
        money: { type: 'number', minimum: 0, maximum: 10000 },
        line: {
          type: 'object',
          properties: {
            sku: { type: 'string', pattern: '^[A-Z]{2}\\d{3}$' },
            qty: { type: 'integer', minimum: 1, maximum: 20 },
            price: { $ref: '#/$defs/money' },
          },
          required: ['sku', 'qty', 'price'],
          additionalProperties: false,
        },
      },
      type: 'object',
      properties: {
        number: { type: 'string', pattern: '^INV-\\d{4}$' },
        issued: { type: 'string', format: 'date' },
        currency: { enum: ['EUR', 'USD', 'GBP'] },
        lines: { type: 'array', items: { $ref: '#/$defs/line' }, minItems: 1, maxItems: 3 },
        paid: { type: 'boolean' },
        note: { type: ['string', 'null'], maxLength: 20 },
      },
      required: ['number', 'issued', 'currency', 'lines'],
      additionalProperties: false,
    },
  },
];
