"""`streams ui`: a key's replicated history drawn in the browser (lanes per region, causal
arrows, the state at any op), over the same fold as `streams history`, `replay` and `diff`.

`api` shapes their results as JSON, `source` calls them (and keeps what they read), `server`
serves the page and the JSON, `arguments` is the verb; `static/` holds the page (one HTML shell,
one vanilla script drawing SVG, one style sheet: no build step)."""
