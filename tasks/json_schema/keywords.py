"""Every JSON Schema keyword the compiler knows, what it constrains, and the method that reads it: `KEYWORDS`.

Where do I add a keyword? Here, one row of `KEYWORDS`, then the methods the row names:

1. `applies`: the instance types whose values the keyword constrains (validators ignore it on other types: `pattern`
   passes every number); empty for a keyword that constrains every value (`type`, `enum`, `not`, ...).
2. `writes`: the types whose values the compiler writes with the keyword honoured. Until a type is listed, a schema
   using the keyword on that type is refused ("unsupported keyword 'x' for type 'y'", `ValuesMixin.check_keywords`),
   never written wrong. Read it in the method that writes values of that type (`VALUE_REGEXES`: values.py for
   scalars, containers.py for arrays and objects; layout.py where a scaffold is built), and name that method in
   `read_by`.
3. `merge` (optional): a `RewriteMixin` method (rewrite.py) that merges two different values of the keyword in allOf
   parts into one: `merge_x(out, key, mine, value, path)` writes what both accept into `out` and returns True (False
   where it has no merge of the two). Without one, equal values merge and different ones are an error ("unsupported
   keyword 'x' with different values in 'allOf' parts").
4. `negate` (optional): a `NegationMixin` method (negation.py) that lists the ways to fail the keyword, each a
   restriction of the rest of the schema, for a folded `not`: `negate_x(rest, neg, key, path, seen)` returns (the
   restrictions, None for one that leaves no value; whether they are every way to fail it). Without one,
   `not` of the keyword is an error ("unsupported keyword 'not' (of x)"). Its place in NEGATION_ORDER says when it is
   tried (the ways that keep most values first).

A keyword that is rewritten away before values are written (`$ref`, allOf, if / then / else, `not`) writes no type:
`read_by` names the rewriting method. tests/test_json_schema_layers.py checks that every method named here exists.
A key that is in no row (an annotation, a vendor extension, a typo) is ignored, as validators ignore it.
"""

from __future__ import annotations

from dataclasses import dataclass

# The JSON types, as the `type` keyword names them ("integer": numbers that are integers).
TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")
SCALARS = ("string", "integer", "number", "boolean", "null")
NUMBERS = ("integer", "number")

# The method that writes a value of each type (its regex; `ValuesMixin.compute_value_regex` dispatches on the type).
VALUE_REGEXES = {
    "object": "object_regex", "array": "array_regex", "string": "string_regex", "integer": "integer_value_regex",
    "number": "number_value_regex", "boolean": "boolean_regex", "null": "null_regex",
}

# Keywords of the compiler's own, never in a user's schema (load.to_2020_12 drops them). EXCLUDED: regexes over a
# string's or integer's JSON text that the value must not match, added where a `not` is folded (enum, const,
# pattern); the slot holds their complements. PATTERNS: further patterns a string must match (allOf parts with
# different patterns). MULTIPLES: the multipleOf values of allOf parts whose least common multiple `multipleOf` holds;
# each is still checked as validators check it, in floating point. NOT_MULTIPLES: values a number must not be a
# multiple of (a folded `not`).
EXCLUDED = "$diffreason:excluded"
PATTERNS = "$diffreason:patterns"
MULTIPLES = "$diffreason:multiples"
NOT_MULTIPLES = "$diffreason:not-multiples"
# REFS: the `$ref`s followed (resolve's `seen`) on the way to a schema merged from resolved parts (allOf parts, anyOf /
# oneOf branches beside siblings). Resolving it carries them on, so a recursive `$ref` inside such a part still
# counts toward the depth limit (without it, each merge started the count afresh: unbounded recursion). Not a
# validation keyword: validators and the keyword checks ignore it.
REFS = "$diffreason:refs"


@dataclass(frozen=True)
class Keyword:
    """One row of KEYWORDS (see the module's docstring)."""

    applies: tuple[str, ...] = ()  # the types whose instances it constrains; () for every instance
    writes: tuple[str, ...] = ()  # the types whose values the compiler writes honouring it
    read_by: tuple[str, ...] = ()  # the methods that read it (none: refused wherever it applies)
    merge: str | None = None  # RewriteMixin method merging two different values in allOf parts
    negate: str | None = None  # NegationMixin method listing the ways to fail it (a folded `not`)


_STRING, _ARRAY, _OBJECT = ("string",), ("array",), ("object",)
_NUMBER_BOUND = ("integer_value_regex", "number_regex")
_OBJECT_MEMBERS = ("members",)

# Keywords that constrain instances (JSON Schema 2020-12 and, translated by load.to_2020_12, drafts 4 to 2019-09).
KEYWORDS: dict[str, Keyword] = {
    # -- any value
    "type": Keyword((), TYPES, ("compute_value_regex", "template"), "merge_type", "negate_type"),
    "enum": Keyword((), SCALARS, ("enum_regex",), "merge_enum", "negate_enum"),
    "const": Keyword((), SCALARS, ("enum_regex",), "merge_const", "negate_enum"),
    "$ref": Keyword(read_by=("resolve",)),
    "allOf": Keyword(read_by=("merge_all_of",)),
    "anyOf": Keyword(read_by=("alternatives_regex", "branch_template"), merge="merge_alternatives",
                     negate="negate_alternatives"),
    "oneOf": Keyword(read_by=("alternatives_regex", "branch_template"), merge="merge_alternatives",
                     negate="negate_alternatives"),
    "not": Keyword(read_by=("without_not",), merge="merge_not", negate="negate_not"),
    "if": Keyword(read_by=("without_if",)),
    "then": Keyword(read_by=("without_if",)),
    "else": Keyword(read_by=("without_if",)),
    "$dynamicRef": Keyword(),  # (load.to_2020_12 makes one that is a JSON pointer a `$ref`)
    "$recursiveRef": Keyword(),
    # -- numbers
    "multipleOf": Keyword(NUMBERS, NUMBERS, ("multiples_regex",), "merge_multiple_of", "negate_multiple_of"),
    "minimum": Keyword(NUMBERS, NUMBERS, _NUMBER_BOUND, "merge_lower", "negate_bound"),
    "exclusiveMinimum": Keyword(NUMBERS, NUMBERS, _NUMBER_BOUND, "merge_lower", "negate_bound"),
    "maximum": Keyword(NUMBERS, NUMBERS, _NUMBER_BOUND, "merge_upper", "negate_bound"),
    "exclusiveMaximum": Keyword(NUMBERS, NUMBERS, _NUMBER_BOUND, "merge_upper", "negate_bound"),
    # -- strings
    "minLength": Keyword(_STRING, _STRING, ("string_regex",), "merge_lower", "negate_bound"),
    "maxLength": Keyword(_STRING, _STRING, ("string_regex",), "merge_upper", "negate_bound"),
    "pattern": Keyword(_STRING, _STRING, ("string_regex",), "merge_pattern", "negate_pattern"),
    "format": Keyword(_STRING, _STRING, ("string_regex",)),
    # -- arrays (prefixItems and items of two allOf parts merge element by element: RewriteMixin.merge_arrays)
    "items": Keyword(_ARRAY, _ARRAY, ("array_items", "tuple_items"), "merge_subschema", "negate_items"),
    "prefixItems": Keyword(_ARRAY, _ARRAY, ("tuple_items",)),
    "additionalItems": Keyword(_ARRAY, _ARRAY, ("tuple_items",)),  # (before 2020-12; translated to `items`)
    "minItems": Keyword(_ARRAY, _ARRAY, ("array_items", "list_regex", "array_template"), "merge_lower",
                        "negate_bound"),
    "maxItems": Keyword(_ARRAY, _ARRAY, ("array_items", "list_regex"), "merge_upper", "negate_bound"),
    "uniqueItems": Keyword(_ARRAY, _ARRAY, ("unique_array_regex", "tuple_regex", "array_template")),
    "contains": Keyword(_ARRAY, _ARRAY, ("contains_count", "containing_array_regex", "containing_tuple"),
                        negate="negate_contains"),
    "minContains": Keyword(_ARRAY, _ARRAY, ("contains_count",), negate="negate_contains_count"),
    "maxContains": Keyword(_ARRAY, (), ("contains_count",), negate="negate_contains_count"),
    "unevaluatedItems": Keyword(_ARRAY),
    # -- objects
    "properties": Keyword(_OBJECT, _OBJECT, _OBJECT_MEMBERS, "merge_properties", "negate_properties"),
    "required": Keyword(_OBJECT, _OBJECT, _OBJECT_MEMBERS, "merge_required", "negate_required"),
    "additionalProperties": Keyword(_OBJECT, _OBJECT, ("members", "map_member"), "merge_subschema"),
    "patternProperties": Keyword(_OBJECT, _OBJECT, ("members", "map_member"), "merge_pattern_properties",
                                 "negate_pattern_properties"),
    "minProperties": Keyword(_OBJECT, _OBJECT, ("members", "map_template"), "merge_lower"),
    "maxProperties": Keyword(_OBJECT, _OBJECT, _OBJECT_MEMBERS, "merge_upper"),
    "dependentRequired": Keyword(_OBJECT, _OBJECT, _OBJECT_MEMBERS),
    "dependentSchemas": Keyword(_OBJECT, _OBJECT, ("members", "brought_schemas")),
    "dependencies": Keyword(_OBJECT, _OBJECT, _OBJECT_MEMBERS),  # (before 2019-09; translated to the two above)
    "propertyNames": Keyword(_OBJECT, _OBJECT, ("members", "map_member"), "merge_subschema",
                             "negate_property_names"),
    "unevaluatedProperties": Keyword(_OBJECT),
    # -- the compiler's own (see EXCLUDED)
    EXCLUDED: Keyword((), ("string", "integer"), ("string_regex", "integer_value_regex"), "merge_lists"),
    PATTERNS: Keyword(_STRING, _STRING, ("string_regex",), "merge_lists"),
    MULTIPLES: Keyword(NUMBERS, NUMBERS, ("checker",), "merge_lists"),
    NOT_MULTIPLES: Keyword(NUMBERS, NUMBERS, ("multiples_regex",), "merge_lists"),
}

# Keywords that only annotate: they never change which instances validate.
ANNOTATIONS = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly",
    "writeOnly", "markdownDescription", "id", "$defs", "definitions", "contentMediaType", "contentEncoding",
}
# The tables the compiler reads, all from KEYWORDS. VALIDATION_KEYWORDS: every keyword that constrains instances.
# APPLIES: a type → the keywords that constrain only instances of it (others ignore them, as validators do); GENERIC:
# the keywords that constrain every instance. SUPPORTED: a type → the keywords its values are written with.
VALIDATION_KEYWORDS = set(KEYWORDS)
APPLIES = {kind: {key for key, row in KEYWORDS.items() if kind in row.applies} for kind in TYPES}
GENERIC = {key for key, row in KEYWORDS.items() if not row.applies}
SUPPORTED = {kind: {key for key, row in KEYWORDS.items() if kind in row.writes} for kind in TYPES}

# What an unconstrained value ({} or true) becomes: any scalar — every one of them validates.
ANY_VALUE = {"type": ["string", "number", "boolean", "null"]}
FINITE_TYPES = {"boolean": [True, False], "null": [None]}

# Ways to fail a bound (NegationMixin.negate_bound): keyword → (the type it applies to, the bound that fails it,
# shift of the value; None: the same value, as the exclusive / inclusive counterpart).
NEGATED_BOUNDS = {
    "minimum": ("number", "exclusiveMaximum", None), "exclusiveMinimum": ("number", "maximum", None),
    "maximum": ("number", "exclusiveMinimum", None), "exclusiveMaximum": ("number", "minimum", None),
    "minLength": ("string", "maxLength", -1), "maxLength": ("string", "minLength", 1),
    "minItems": ("array", "maxItems", -1), "maxItems": ("array", "minItems", 1),
}
# The order in which a `not`'s keywords are tried: the ways that keep most of the values first (others after these,
# alphabetically).
NEGATION_ORDER = ["type", "enum", "const", "required", *NEGATED_BOUNDS, "pattern", "anyOf", "oneOf", "items",
                  "properties"]
