"""The one hybrid search: query parsing, the lexical and vector legs, fusion, explain."""
