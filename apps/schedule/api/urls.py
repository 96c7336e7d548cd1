from django.urls import URLPattern, URLResolver, path

from apps.schedule.api.views import LifeDetailApi, LifeListCreateApi, TaskCreateApi

urlpatterns: list[URLPattern | URLResolver] = [
    path("schedules/", LifeListCreateApi.as_view(), name="schedule-list"),
    path("schedules/<life_uuid:life_uuid>/", LifeDetailApi.as_view(), name="schedule-detail"),
    path("schedule/tasks/", TaskCreateApi.as_view(), name="schedule-task-create"),
]
