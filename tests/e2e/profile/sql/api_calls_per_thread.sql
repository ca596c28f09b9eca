-- CUDA API calls per thread and function, with the time they took.
SELECT t.value AS thread, f.value AS function, count(*) AS calls
FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r
JOIN ThreadNames AS n ON n.globalTid = r.globalTid
JOIN StringIds AS t ON t.id = n.nameId
JOIN StringIds AS f ON f.id = r.nameId
GROUP BY 1, 2
ORDER BY 1, 2;
-- The rows it returns on sim_vector_add 10 (test_sqlite_export.py):
-- row: sim_vector_add|cudaDeviceSynchronize|10
-- row: sim_vector_add|cudaFree|30
-- row: sim_vector_add|cudaGetLastError|10
-- row: sim_vector_add|cudaLaunchKernel|20
-- row: sim_vector_add|cudaMalloc|30
-- row: sim_vector_add|cudaMemcpy|30
