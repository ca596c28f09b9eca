-- NVIDIA Nsight Systems Analysis Guide, "Common SQLite Examples": "Serialized Process and Thread
-- Identifiers". TABLE_NAME is the guide's own placeholder: the test puts each exported table with a
-- globalTid column in its place.
SELECT globalTid / 0x1000000 % 0x1000000 AS PID, globalTid % 0x1000000 AS TID FROM TABLE_NAME;
