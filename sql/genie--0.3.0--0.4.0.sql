-- genie 0.3.0 -> 0.4.0
\echo Use "ALTER EXTENSION genie UPDATE TO '0.4.0'" to load this file. \quit

-- Indexes built by 0.3.0 keep working: their postings stay int32 (on-disk
-- format 4) until a VACUUM merge or REINDEX packs them (format 5).

-- ---------------------------------------------------------------------------
-- 0.4.0: set predicates through genie_int4_ops.  WHERE tags @> q, tags && q
-- and tags <@ q (the built-in array operators) are answered by intersecting
-- or uniting the postings of q's elements, as bitmap or plain index scans
-- whose rows need no recheck (an ordered scan by <~> leaves the predicate to
-- the executor).  Strategies 3 to 5; 1 and 2 are the orderings.
-- ---------------------------------------------------------------------------
ALTER OPERATOR FAMILY genie_int4_ops USING genie ADD
    OPERATOR 3 && (anyarray, anyarray),
    OPERATOR 4 @> (anyarray, anyarray),
    OPERATOR 5 <@ (anyarray, anyarray);
