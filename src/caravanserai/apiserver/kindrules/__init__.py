"""What a ResourceDefinition adds to its kind beyond the schema, applied by the kind's strategy and the gRPC API:

* `fieldrules`: declarative checks and defaults of fields, and cross-field rules in CEL;
* `admission`: validating and mutating admission hooks called before a write;
* `versions`: further versions of the kind, converted to and from the stored v1 (by the server, or a hook);
* `callbacks`: the one HTTP(S) client the hooks of both share (timeouts, trust, reply limits).
"""
