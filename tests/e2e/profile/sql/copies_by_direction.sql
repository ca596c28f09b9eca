-- Memory copies by direction, named by the ENUM table as nsys exports it.
SELECT kind.label AS direction, count(*) AS copies, sum(m.bytes) AS bytes
FROM CUPTI_ACTIVITY_KIND_MEMCPY AS m
JOIN ENUM_CUDA_MEMCPY_OPER AS kind ON kind.id = m.copyKind
GROUP BY 1
ORDER BY 1;
-- The rows it returns on sim_vector_add 10 (test_sqlite_export.py):
-- row: Device-to-Host|10|41943040
-- row: Host-to-Device|20|83886080
