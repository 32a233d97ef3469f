-- genie 0.4.0 -> 0.5.0
\echo Use "ALTER EXTENSION genie UPDATE TO '0.5.0'" to load this file. \quit

-- Indexes of 0.4.0 work as they are: the on-disk format is unchanged.

-- ---------------------------------------------------------------------------
-- 0.5.0: where a session's genie searches spend their time.  With
-- genie.profile = on every search charges its time to phases (query,
-- cache, load, upload, service, queue, engine, pending, visibility,
-- results), each exclusively; genie_profile() shows the sums since
-- genie_profile_reset().
-- ---------------------------------------------------------------------------
CREATE FUNCTION genie_profile(OUT phase text, OUT calls int8, OUT total_ms float8)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'genie_profile'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

CREATE FUNCTION genie_profile_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'genie_profile_reset'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
