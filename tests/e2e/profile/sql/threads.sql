-- Threads by name, with the pid and tid taken out of globalTid as the nsys documentation shows.
SELECT StringIds.value AS name, count(*) AS threads,
       count(DISTINCT ThreadNames.globalTid / 0x1000000 % 0x1000000) AS processes,
       min(ThreadNames.globalTid % 0x1000000 > 0) AS "tid known"
FROM ThreadNames
JOIN StringIds ON ThreadNames.nameId = StringIds.id
GROUP BY 1
ORDER BY 1;
-- The rows it returns on sim_vector_add 10 (test_sqlite_export.py):
-- row: cutrace-gpu|1|1|1
-- row: sim_vector_add|1|1|1
-- row: simcuda-device|1|1|1
