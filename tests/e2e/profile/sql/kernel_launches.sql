-- Each kernel with the API call that launched it, in the style of the nsys documentation's SQLite
-- examples: names through StringIds, a kernel joined to its call by correlationId within its process
-- (globalPid is the call's globalTid without the thread).
SELECT api.value AS "API function", kernel.value AS "Kernel name", count(*) AS launches
FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
  ON k.correlationId = r.correlationId AND k.globalPid = (r.globalTid & 0xFFFFFFFFFF000000)
JOIN StringIds AS api ON api.id = r.nameId
JOIN StringIds AS kernel ON kernel.id = k.shortName
GROUP BY 1, 2
ORDER BY 2;
-- The rows it returns on sim_vector_add 10 (test_sqlite_export.py):
-- row: cudaLaunchKernel|axpy|10
-- row: cudaLaunchKernel|square_kernel|10
