-- The table of `WORKLOAD=vectors bench/service-bench`: Fashion-MNIST's
-- 60,000 training vectors (784 dimensions, binary COPY files in the psql
-- variable copydir, written by bench/vector_copy.py), an exact-only
-- genie_vector_ops index (m = 0), and the first 1,000 test vectors as
-- stored queries (keep_queries: how many, default 1,000).
\set ON_ERROR_STOP on
CREATE EXTENSION IF NOT EXISTS genie;
CREATE TABLE svc_vecs (id int PRIMARY KEY, v real[]);
CREATE TABLE svc_vec_queries (id int PRIMARY KEY, q real[]);
\set train_copy :copydir '/fm_train.copy'
\set test_copy :copydir '/fm_test.copy'
COPY svc_vecs FROM :'train_copy' WITH (FORMAT binary);
COPY svc_vec_queries FROM :'test_copy' WITH (FORMAT binary);
\if :{?keep_queries} \else \set keep_queries 1000 \endif
DELETE FROM svc_vec_queries WHERE id > :keep_queries;
\timing on
CREATE INDEX svc_vecs_idx ON svc_vecs USING genie (v) WITH (m = 0);
\timing off
VACUUM ANALYZE svc_vecs;
VACUUM ANALYZE svc_vec_queries;
SELECT count(*) AS rows, max(array_length(v, 1)) AS dim FROM svc_vecs;
