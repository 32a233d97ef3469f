-- genie 0.9.0 -> 0.10.0: several GPUs (genie.devices, genie.placement).
-- genie_devices() gets an in_use column: whether genie.devices lets genie
-- use the device.  Nothing stored changes.

\echo Use "ALTER EXTENSION genie UPDATE TO '0.10.0'" to load this file. \quit

DROP FUNCTION genie_devices();

-- One row per compute device genie can use: the CPU first, then each GPU;
-- in_use says whether genie.devices lets genie use it (the CPU always).
CREATE FUNCTION genie_devices(
    OUT kind text,
    OUT ordinal int4,
    OUT name text,
    OUT memory_bytes int8,
    OUT free_memory_bytes int8,
    OUT compute_capability text,
    OUT processors int4,
    OUT usable bool,
    OUT note text,
    OUT in_use bool)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'genie_devices'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
