"""Pages people look at: the run report (``--cuzk-html``) and the results database (``cuzk-perf report``).

Each page is one self-contained HTML file: Jinja2 templates shipped with the package, styles
inline, charts drawn by matplotlib as inline SVG, no network asset, so it opens offline from
a CI artifact and can be mailed on as it is.
"""
