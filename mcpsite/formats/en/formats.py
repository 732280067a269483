"""English formats: ISO dates and 24-hour times with the zone, as the audit pages print them
(``templates/audit/list.html``); the admin showed "Nov. 26, 2026, 6 a.m." before. Input formats
are left to Django's own English module."""

DATETIME_FORMAT = "Y-m-d H:i:s T"
SHORT_DATETIME_FORMAT = "Y-m-d H:i:s T"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
