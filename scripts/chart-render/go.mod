module boarding-connector/chart-render

go 1.19
