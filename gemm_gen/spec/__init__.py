"""What a user asks for and what is legal: the request and its option table (request), every legality and
size rule once (rules/), the config resolved when it is made (config), its checks (checks) and the
call plan (call)."""
