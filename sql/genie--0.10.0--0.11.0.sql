-- genie 0.10.0 -> 0.11.0: genie_knn_bytes, a batch of query vectors sent
-- as raw float32 bytes.  Nothing stored changes.

\echo Use "ALTER EXTENSION genie UPDATE TO '0.11.0'" to load this file. \quit

-- genie_knn over queries sent as raw bytes: float32 values, little-endian,
-- one vector of dim values after another (numpy's astype('<f4').tobytes());
-- dim must be the index's, query_no counts the vectors from 1.  A client
-- sends a batch as one binary bytea parameter, which the server takes
-- without parsing an array element by element:
--   SELECT * FROM genie_knn_bytes('items_v_idx', $1, 784, 10);
CREATE FUNCTION genie_knn_bytes(index regclass, queries bytea, dim int4, k int4)
RETURNS TABLE (query_no int4, ctid tid, distance float8)
AS 'MODULE_PATHNAME', 'genie_knn_bytes'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
