"""The admin dashboard at /admin/ui (issue 7): server-rendered HTML, SVG charts drawn on the
server, one small script and one stylesheet shipped in this package; no CDN, no build step.

router.py (routes, sign-in, CSRF) -> views.py (one method per page) -> queries.py (SQL over
the daily roll-up in rollup.py) and admin_client.py (the admin API, in-process) -> pages.py
(templates/).
"""
