-- pgbench script of bench/run-vector-bench: one exact nearest-neighbour
-- query of a random Fashion-MNIST test vector, LIMIT 10.
\set qid random(1, 10000)
SELECT id FROM fm ORDER BY v <-> (SELECT q FROM fq WHERE id = :qid) LIMIT 10;
